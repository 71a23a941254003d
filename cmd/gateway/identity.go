package main

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/api"
	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/redact"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/store"
)

// keysReload is how often the keys file is checked for a change: a revoked
// key stops working within it.
const keysReload = time.Second

// openIdentity loads the API keys (nil without a keys file), the stream
// token signer, whose secret is the operator's or, unset, the one the
// store keeps for every replica, and the key that seals the secrets of
// runs' MCP servers: AGENTGATE_SECRETS_KEY, or one derived from the
// stream token secret, so that every replica opens what any sealed.
func openIdentity(ctx context.Context, cfg config, st *store.Store, log *zap.Logger) (api.Keys, api.Tokens, []byte, error) {
	var keys api.Keys
	if cfg.APIKeysFile != "" {
		kf, err := auth.Watch(ctx, cfg.APIKeysFile, log.Named("keys"), keysReload)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("AGENTGATE_API_KEYS_FILE: %w", err)
		}
		log.Info("API keys loaded", zap.String("file", cfg.APIKeysFile), zap.Int("keys", kf.Keyring().Len()),
			zap.Int("tenants", len(kf.Tenants())))
		keys = kf
	} else if cfg.InsecureNoAuth {
		log.Warn("no API keys and AGENTGATE_INSECURE_NO_AUTH=true: anyone who reaches " + cfg.Addr +
			" can run agents, read every run and cancel it")
	} else {
		log.Warn("no API keys (AGENTGATE_API_KEYS_FILE): listening on loopback only, for one anonymous tenant",
			zap.String("addr", cfg.Addr))
	}
	secret := []byte(cfg.StreamTokenSecret)
	if len(secret) == 0 {
		var err error
		if secret, err = st.StreamTokenSecret(ctx); err != nil {
			return nil, nil, nil, err
		}
	}
	var previous [][]byte
	if p := cfg.StreamTokenSecretPrevious; p != "" {
		previous = append(previous, []byte(p))
	}
	signer, err := auth.NewSigner(secret, previous...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("stream tokens: %w", err)
	}
	return keys, signer, sealKey(cfg.SecretsKey, secret), nil
}

// sealKey is the AES-256 key that seals MCP secrets: from the operator's
// own key when set, else from the stream token secret, under a label of
// its own so that neither key tells anything of the other.
func sealKey(operator string, streamSecret []byte) []byte {
	base := []byte(operator)
	if len(base) == 0 {
		base = streamSecret
	}
	mac := hmac.New(sha256.New, base)
	mac.Write([]byte("agentgate mcp secrets seal v1"))
	return mac.Sum(nil)
}

// newRedactor builds the redactor of logs, events and records: the
// operator's patterns, the built-in credential shapes, and the values of
// the gateway's own secrets and of every credential variable an agent is
// given. Each run adds its own agent's on top.
func newRedactor(cfg config, roster []runs.Adapter, getenv func(string) string) (*redact.Redactor, error) {
	var patterns []string
	if cfg.RedactPatternsFile != "" {
		f, err := os.Open(cfg.RedactPatternsFile)
		if err != nil {
			return nil, fmt.Errorf("AGENTGATE_REDACT_PATTERNS_FILE: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			patterns = append(patterns, line)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("AGENTGATE_REDACT_PATTERNS_FILE: %w", err)
		}
	}
	literals := []string{cfg.StreamTokenSecret, cfg.StreamTokenSecretPrevious, cfg.SecretsKey, cfg.WebhookSecret, cfg.WebhookSecretPrevious}
	for _, a := range roster {
		for _, name := range a.Describe().CredentialEnv {
			literals = append(literals, getenv(name))
		}
	}
	for _, u := range strings.Split(cfg.NATSURL, ",") {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
			pw, _ := p.User.Password()
			literals = append(literals, pw)
			if pw == "" {
				literals = append(literals, p.User.Username()) // a token as the user
			}
		}
	}
	r, err := redact.New(redact.Options{Literals: literals, Patterns: patterns})
	if err != nil {
		return nil, fmt.Errorf("AGENTGATE_REDACT_PATTERNS_FILE: %w", err)
	}
	return r, nil
}
