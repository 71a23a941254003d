package main

import (
	"context"
	"fmt"
	"github.com/agentgate/agentgate/internal/schedules"
	"github.com/agentgate/agentgate/internal/triggers"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/supervisor"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// validateWebhooks checks the AGENTGATE_WEBHOOK_* settings.
func (c *config) validateWebhooks() []error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("AGENTGATE_%s: "+format, append([]any{name}, args...)...))
	}
	if _, err := c.webhookSecrets(); err != nil {
		errs = append(errs, err)
	}
	if _, err := webhooks.ParseAllowList(c.WebhookAllowHosts); err != nil {
		bad("WEBHOOK_ALLOW_HOSTS", "%v", err)
	}
	if c.WebhookTimeout < time.Second || c.WebhookTimeout > webhooks.MaxTimeout {
		bad("WEBHOOK_TIMEOUT", "must be 1s to %s, got %s", webhooks.MaxTimeout, c.WebhookTimeout)
	}
	if c.WebhookMaxAttempts < 1 || c.WebhookMaxAttempts > 100 {
		bad("WEBHOOK_MAX_ATTEMPTS", "must be 1 to 100, got %d", c.WebhookMaxAttempts)
	}
	if c.WebhookRetryMin < 10*time.Millisecond {
		bad("WEBHOOK_RETRY_MIN", "must be at least 10ms, got %s", c.WebhookRetryMin)
	}
	if c.WebhookRetryMax < c.WebhookRetryMin {
		bad("WEBHOOK_RETRY_MAX", "%s is less than WEBHOOK_RETRY_MIN %s", c.WebhookRetryMax, c.WebhookRetryMin)
	}
	if c.WebhookRetryFor <= 0 {
		bad("WEBHOOK_RETRY_FOR", "must be positive, got %s", c.WebhookRetryFor)
	}
	if c.WebhookWorkers < 1 || c.WebhookWorkers > 256 {
		bad("WEBHOOK_WORKERS", "must be 1 to 256, got %d", c.WebhookWorkers)
	}
	return errs
}

// webhookSecrets are the gateway's signing secrets, the current first.
func (c *config) webhookSecrets() ([]webhooks.Secret, error) {
	if c.WebhookSecret == "" && c.WebhookSecretPrevious != "" {
		return nil, fmt.Errorf("AGENTGATE_WEBHOOK_SECRET_PREVIOUS: set without AGENTGATE_WEBHOOK_SECRET")
	}
	var out []webhooks.Secret
	for _, v := range []struct{ name, value string }{
		{"WEBHOOK_SECRET", c.WebhookSecret}, {"WEBHOOK_SECRET_PREVIOUS", c.WebhookSecretPrevious},
	} {
		if v.value == "" {
			continue
		}
		s, err := webhooks.ParseSecret(v.value)
		if err != nil {
			return nil, fmt.Errorf("AGENTGATE_%s: %w", v.name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// tenantsReload is how often the webhooks file is checked for a change.
const tenantsReload = time.Second

// openWebhooks builds the deliverer of runs' webhooks, on the store every
// replica shares, and starts it; close stops it (deliveries waiting for a
// retry stay queued in the store, for any replica) and the watch of the
// webhooks file.
func openWebhooks(ctx context.Context, cfg config, st webhooks.Store, reg prometheus.Registerer, log *zap.Logger) (*webhooks.Deliverer, func(), error) {
	secrets, err := cfg.webhookSecrets()
	if err != nil {
		return nil, nil, err
	}
	policy, err := webhooks.ParseAllowList(cfg.WebhookAllowHosts)
	if err != nil {
		return nil, nil, fmt.Errorf("AGENTGATE_WEBHOOK_ALLOW_HOSTS: %w", err)
	}
	obs, err := webhooks.NewMetrics(reg)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook metrics: %w", err)
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	tenants := func() *webhooks.Tenants { return nil }
	waitWatch := func() {}
	if cfg.WebhooksFile != "" {
		check := func(u string) error { _, err := policy.CheckURL(u); return err }
		tf, err := webhooks.WatchTenants(watchCtx, cfg.WebhooksFile, check, len(secrets) > 0, log, tenantsReload)
		if err != nil {
			stopWatch()
			return nil, nil, fmt.Errorf("AGENTGATE_WEBHOOKS_FILE: %w", err)
		}
		log.Info("webhooks file loaded", zap.String("file", cfg.WebhooksFile), zap.Int("tenants", tf.Tenants().Len()))
		tenants, waitWatch = tf.Tenants, tf.Wait
	}
	if len(secrets) == 0 && cfg.WebhooksFile == "" {
		log.Info("no AGENTGATE_WEBHOOK_SECRET: runs naming a webhook_url are refused")
	}
	d := webhooks.New(st, webhooks.Options{
		Secrets: secrets, Tenants: tenants, Policy: policy, Timeout: cfg.WebhookTimeout,
		MaxAttempts: cfg.WebhookMaxAttempts, RetryMin: cfg.WebhookRetryMin, RetryMax: cfg.WebhookRetryMax,
		RetryFor: cfg.WebhookRetryFor, Workers: cfg.WebhookWorkers, Observer: obs, Log: log,
	})
	d.Start()
	return d, func() { d.Close(); stopWatch(); waitWatch() }, nil
}

// service is the API's service: the supervisor, and the webhook
// deliveries of its runs (api.Webhooks).
type service struct {
	*supervisor.Supervisor
	hooks     *webhooks.Deliverer
	schedules *schedules.Service
	triggers  *triggers.Service
}

// RunWebhooks implements api.Webhooks.
func (s service) RunWebhooks(ctx context.Context, r runs.Run) ([]webhooks.Delivery, error) {
	return s.hooks.Deliveries(ctx, r.ID)
}
