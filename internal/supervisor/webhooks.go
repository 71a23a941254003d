package supervisor

import "github.com/agentgate/agentgate/internal/runs"

// Webhooks is who sends runs' webhooks (internal/webhooks): Config.Webhooks.
type Webhooks interface {
	// CheckWebhookURL checks a spec's WebhookURL for the run's tenant at
	// submission: nil, or an error wrapping ErrInvalid (a *FieldError
	// naming FieldWebhookURL) that the client gets as a 400.
	CheckWebhookURL(tenant, url string) error
	// NotifyWebhooks is handed each run.completed and approval.requested
	// of every run as it is emitted: the run (at run.completed, its
	// finished record) and the event as it is stored (redacted). It must
	// not block, and decides itself whether the run has a webhook.
	NotifyWebhooks(r runs.Run, ev runs.StoredEvent)
}

// checkWebhook checks a submitted spec's WebhookURL against the
// gateway's webhook configuration.
func (s *Supervisor) checkWebhook(spec runs.Spec) error {
	if spec.WebhookURL == "" {
		return nil
	}
	if s.cfg.Webhooks == nil {
		return &runs.FieldError{Field: runs.FieldWebhookURL, Kind: runs.ErrInvalid, Code: runs.CodeWebhooksDisabled,
			Reason: "this gateway sends no webhooks"}
	}
	return s.cfg.Webhooks.CheckWebhookURL(spec.Tenant, spec.WebhookURL)
}

// isWebhookEvent reports whether events of type t are handed to
// Config.Webhooks.
func isWebhookEvent(t runs.EventType) bool {
	return t == runs.EventRunCompleted || t == runs.EventApprovalRequested
}

// notifyWebhooks hands what emit stored of the webhook events to
// Config.Webhooks, with the run as it was then.
func (s *Supervisor) notifyWebhooks(r runs.Run, evs []runs.StoredEvent) {
	for _, ev := range evs {
		s.cfg.Webhooks.NotifyWebhooks(r, ev)
	}
}
