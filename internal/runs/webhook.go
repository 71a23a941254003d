package runs

import (
	"fmt"
	"strings"
)

// MaxWebhookURLBytes bounds Spec.WebhookURL.
const MaxWebhookURLBytes = 2048

// The codes of a refused webhook_url.
const (
	// CodeWebhooksDisabled: nothing would sign the run's webhooks.
	CodeWebhooksDisabled = "webhooks_disabled"
	// CodeWebhookURLRefused: the URL reaches an address the gateway's
	// allow-list refuses.
	CodeWebhookURLRefused = "webhook_url_refused"
)

// checkWebhookSyntax is Validate's check of WebhookURL: what needs no
// configuration. The rest is Webhooks.CheckWebhookURL's.
func checkWebhookSyntax(u string) error {
	switch {
	case u == "":
		return nil
	case len(u) > MaxWebhookURLBytes:
		return Invalid(FieldWebhookURL, fmt.Sprintf("is longer than %d bytes", MaxWebhookURLBytes))
	case !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://"):
		return Invalid(FieldWebhookURL, "must be an https URL")
	}
	return nil
}
