package triggers

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
	"github.com/agentgate/agentgate/internal/webhooks"
)

// epoch is the tests' clock.
var epoch = time.Unix(1_767_000_000, 0)

func header(pairs ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

func githubSignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func standardHeaders(t *testing.T, secret, id string, at time.Time, body []byte) http.Header {
	t.Helper()
	key, err := webhooks.ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	webhooks.SetHeaders(h, []webhooks.Secret{key}, id, at, body)
	return h
}

func newSecret(t testing.TB, v Verify) string {
	t.Helper()
	s, err := NewSecret(v)
	if err != nil {
		t.Fatalf("NewSecret(%s): %v", v, err)
	}
	return s
}

func TestVerifyValid(t *testing.T) {
	for v, want := range map[Verify]bool{
		VerifyToken: true, VerifyGitHub: true, VerifyStandardWebhooks: true,
		"": false, "Token": false, "hmac": false,
	} {
		if got := v.Valid(); got != want {
			t.Errorf("Verify(%q).Valid() = %v, want %v", v, got, want)
		}
	}
}

func TestNewSecretShapes(t *testing.T) {
	token := newSecret(t, VerifyToken)
	enc, ok := strings.CutPrefix(token, TokenPrefix)
	if raw, err := base64.RawURLEncoding.DecodeString(enc); !ok || err != nil || len(raw) != 32 {
		t.Errorf("token secret %q: want %s and 32 bytes of unpadded base64url", token, TokenPrefix)
	}
	github := newSecret(t, VerifyGitHub)
	if raw, err := hex.DecodeString(github); err != nil || len(raw) != 32 || strings.ToLower(github) != github {
		t.Errorf("github secret %q: want 64 lower-case hex digits", github)
	}
	standard := newSecret(t, VerifyStandardWebhooks)
	if _, err := webhooks.ParseSecret(standard); err != nil {
		t.Errorf("standard_webhooks secret %q does not parse: %v", standard, err)
	}
	enc, _ = strings.CutPrefix(standard, webhooks.SecretPrefix)
	if raw, err := base64.StdEncoding.DecodeString(enc); err != nil || len(raw) != 32 {
		t.Errorf("standard_webhooks secret %q: want 32 bytes", standard)
	}
	if _, err := NewSecret("hmac"); err == nil {
		t.Error("NewSecret(hmac) made a secret")
	}
}

func TestNewSecretIsRandom(t *testing.T) {
	for _, v := range []Verify{VerifyToken, VerifyGitHub, VerifyStandardWebhooks} {
		if a, b := newSecret(t, v), newSecret(t, v); a == b {
			t.Errorf("NewSecret(%s) gave %q twice", v, a)
		}
	}
}

func TestHashToken(t *testing.T) {
	// SHA-256 of "abc", FIPS 180-2's example.
	if got := HashToken("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("HashToken(abc) = %s", got)
	}
}

func TestCheckToken(t *testing.T) {
	token := newSecret(t, VerifyToken)
	s := Secrets{Current: HashToken(token)}
	for _, tc := range []struct {
		name string
		h    http.Header
		ok   bool
	}{
		{"bearer", header("Authorization", "Bearer "+token), true},
		{"scheme in any case", header("Authorization", "bEARER "+token), true},
		{"no header", header(), false},
		{"two headers", header("Authorization", "Bearer "+token, "Authorization", "Bearer "+token), false},
		{"other scheme", header("Authorization", "Basic "+token), false},
		{"no scheme", header("Authorization", token), false},
		{"two spaces", header("Authorization", "Bearer  "+token), false},
		{"trailing space", header("Authorization", "Bearer "+token+" "), false},
		{"empty token", header("Authorization", "Bearer "), false},
		{"another token", header("Authorization", "Bearer "+newSecret(t, VerifyToken)), false},
		{"the stored hash", header("Authorization", "Bearer "+HashToken(token)), false},
		{"a prefix of it", header("Authorization", "Bearer "+token[:len(token)-1]), false},
	} {
		err := Check(VerifyToken, s, tc.h, []byte("{}"), epoch)
		if (err == nil) != tc.ok || err != nil && err != ErrBadProof {
			t.Errorf("%s: Check = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// A token trigger keeps hashes: a plain token in Secrets proves nothing,
// so a store that kept tokens by mistake would fail every delivery.
func TestCheckTokenSecretsAreHashes(t *testing.T) {
	token := newSecret(t, VerifyToken)
	h := header("Authorization", "Bearer "+token)
	if err := Check(VerifyToken, Secrets{Current: token}, h, nil, epoch); err != ErrBadProof {
		t.Errorf("Check with the plain token as the secret = %v, want ErrBadProof", err)
	}
	if err := Check(VerifyToken, Secrets{Current: HashToken(token)}, h, nil, epoch); err != nil {
		t.Errorf("Check with the token's hash = %v", err)
	}
}

// GitHub's own example (docs: "Validating webhook deliveries").
func TestCheckGitHubDocumentedVector(t *testing.T) {
	s := Secrets{Current: "It's a Secret to Everybody"}
	body := []byte("Hello, World!")
	want := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	if got := githubSignature(s.Current, body); got != want {
		t.Fatalf("the test's own signer gives %s", got)
	}
	if err := Check(VerifyGitHub, s, header("X-Hub-Signature-256", want), body, epoch); err != nil {
		t.Errorf("Check(GitHub's vector) = %v", err)
	}
	upper := "sha256=" + strings.ToUpper(strings.TrimPrefix(want, "sha256="))
	if err := Check(VerifyGitHub, s, header("X-Hub-Signature-256", upper), body, epoch); err != nil {
		t.Errorf("Check(GitHub's vector in upper-case hex) = %v", err)
	}
	if err := Check(VerifyGitHub, s, header("X-Hub-Signature-256", want), []byte("Hello, World?"), epoch); err != ErrBadProof {
		t.Errorf("Check(GitHub's vector, another body) = %v, want ErrBadProof", err)
	}
}

func TestCheckGitHub(t *testing.T) {
	secret := newSecret(t, VerifyGitHub)
	body := []byte(`{"action":"opened"}`)
	sig := githubSignature(secret, body)
	for _, tc := range []struct {
		name string
		h    http.Header
		ok   bool
	}{
		{"signed", header("X-Hub-Signature-256", sig), true},
		{"lower-case header name", header("x-hub-signature-256", sig), true},
		{"no header", header(), false},
		{"sha1 header only", header("X-Hub-Signature", "sha1="+strings.Repeat("0", 40)), false},
		{"two headers", header("X-Hub-Signature-256", sig, "X-Hub-Signature-256", sig), false},
		{"no prefix", header("X-Hub-Signature-256", strings.TrimPrefix(sig, "sha256=")), false},
		{"upper-case prefix", header("X-Hub-Signature-256", "SHA256="+strings.TrimPrefix(sig, "sha256=")), false},
		{"short", header("X-Hub-Signature-256", sig[:len(sig)-2]), false},
		{"not hex", header("X-Hub-Signature-256", sig[:len(sig)-1]+"g"), false},
		{"another secret", header("X-Hub-Signature-256", githubSignature(newSecret(t, VerifyGitHub), body)), false},
		{"empty key", header("X-Hub-Signature-256", githubSignature("", body)), false},
	} {
		err := Check(VerifyGitHub, Secrets{Current: secret}, tc.h, body, epoch)
		if (err == nil) != tc.ok || err != nil && err != ErrBadProof {
			t.Errorf("%s: Check = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestCheckStandardWebhooks(t *testing.T) {
	secret := newSecret(t, VerifyStandardWebhooks)
	s := Secrets{Current: secret}
	body := []byte(`{"type":"ping"}`)
	h := standardHeaders(t, secret, "msg_1", epoch, body)
	if err := Check(VerifyStandardWebhooks, s, h, body, epoch.Add(4*time.Minute)); err != nil {
		t.Errorf("Check 4 minutes later = %v", err)
	}
	if err := Check(VerifyStandardWebhooks, s, h, body, epoch.Add(-4*time.Minute)); err != nil {
		t.Errorf("Check 4 minutes earlier = %v", err)
	}
	for name, now := range map[string]time.Time{"6 minutes later": epoch.Add(6 * time.Minute), "6 minutes earlier": epoch.Add(-6 * time.Minute)} {
		if err := Check(VerifyStandardWebhooks, s, h, body, now); err != ErrBadProof {
			t.Errorf("Check %s = %v, want ErrBadProof", name, err)
		}
	}
	other := standardHeaders(t, newSecret(t, VerifyStandardWebhooks), "msg_1", epoch, body)
	if err := Check(VerifyStandardWebhooks, s, other, body, epoch); err != ErrBadProof {
		t.Errorf("Check signed by another secret = %v, want ErrBadProof", err)
	}
	if err := Check(VerifyStandardWebhooks, Secrets{Current: "not whsec"}, h, body, epoch); err != ErrBadProof {
		t.Errorf("Check with a secret that does not parse = %v, want ErrBadProof", err)
	}
	h.Set("webhook-id", "msg_2")
	if err := Check(VerifyStandardWebhooks, s, h, body, epoch); err != ErrBadProof {
		t.Errorf("Check with another webhook-id = %v, want ErrBadProof", err)
	}
}

// signedBy returns, for each Verify, a delivery proved with secret and
// the Secrets entry that stands for it.
func signedBy(t *testing.T, v Verify, secret string, body []byte) (http.Header, string) {
	switch v {
	case VerifyToken:
		return header("Authorization", "Bearer "+secret), HashToken(secret)
	case VerifyGitHub:
		return header("X-Hub-Signature-256", githubSignature(secret, body)), secret
	}
	return standardHeaders(t, secret, "msg_rotate", epoch, body), secret
}

func TestCheckPreviousSecretUntilItExpires(t *testing.T) {
	body := []byte(`[1,2]`)
	for _, v := range []Verify{VerifyToken, VerifyGitHub, VerifyStandardWebhooks} {
		oldHeaders, old := signedBy(t, v, newSecret(t, v), body)
		newHeaders, current := signedBy(t, v, newSecret(t, v), body)
		s := Secrets{Current: current, Previous: old, PreviousUntil: epoch.Add(time.Minute)}
		if err := Check(v, s, newHeaders, body, epoch); err != nil {
			t.Errorf("%s: the current secret: %v", v, err)
		}
		if err := Check(v, s, oldHeaders, body, epoch.Add(time.Minute-time.Second)); err != nil {
			t.Errorf("%s: the previous secret before it expires: %v", v, err)
		}
		if err := Check(v, s, oldHeaders, body, epoch.Add(time.Minute)); err != ErrBadProof {
			t.Errorf("%s: the previous secret once it expired = %v, want ErrBadProof", v, err)
		}
		if err := Check(v, Secrets{Previous: old, PreviousUntil: epoch.Add(time.Minute)}, oldHeaders, body, epoch); err != nil {
			t.Errorf("%s: only a previous secret: %v", v, err)
		}
	}
}

func TestCheckWithoutSecretsOrKnownVerify(t *testing.T) {
	body := []byte(`{}`)
	for _, v := range []Verify{VerifyToken, VerifyGitHub, VerifyStandardWebhooks} {
		// What anyone can compute without a secret.
		h := header("Authorization", "Bearer ", "X-Hub-Signature-256", githubSignature("", body))
		if err := Check(v, Secrets{}, h, body, epoch); err != ErrBadProof {
			t.Errorf("%s with no secret = %v, want ErrBadProof", v, err)
		}
	}
	secret := newSecret(t, VerifyGitHub)
	h := header("X-Hub-Signature-256", githubSignature(secret, body))
	if err := Check("hmac", Secrets{Current: secret}, h, body, epoch); err != ErrBadProof {
		t.Errorf("an unknown verify = %v, want ErrBadProof", err)
	}
}

// nodeSigner is tools/webhooks/sign.mjs, or the test fails: the check of a
// standard_webhooks delivery is tested against the official library.
func nodeSigner(t *testing.T) (node, script string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal("node is not installed (Node.js 20 or later is needed): install it, then run scripts/install-webhooks.sh")
	}
	dir, err := filepath.Abs("../../tools/webhooks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		t.Fatal("standardwebhooks is not installed in tools/webhooks: run scripts/install-webhooks.sh")
	}
	return node, filepath.Join(dir, "sign.mjs")
}

// officialSignature returns the webhook-signature the official Standard
// Webhooks library computes.
func officialSignature(t *testing.T, secret, id string, at time.Time, body []byte) string {
	t.Helper()
	node, script := nodeSigner(t)
	in, _ := json.Marshal(map[string]any{"secret": secret, "id": id, "timestamp": at.Unix(), "body": string(body)})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sign.mjs: %v\n%s", err, stderr.Bytes())
	}
	return strings.TrimSpace(string(out))
}

func TestCheckAcceptsTheOfficialStandardWebhooksLibrary(t *testing.T) {
	secret := newSecret(t, VerifyStandardWebhooks)
	body := []byte(`{"type":"issue.opened","data":{"title":"Ünïcode & <tags>"}}`)
	id := "msg_2pVBa0Gv7d8tJkNqQyq1VQ"
	sig := officialSignature(t, secret, id, epoch, body)
	h := header("webhook-id", id, "webhook-timestamp", strconv.FormatInt(epoch.Unix(), 10), "webhook-signature", sig)
	if err := Check(VerifyStandardWebhooks, Secrets{Current: secret}, h, body, epoch.Add(30*time.Second)); err != nil {
		t.Fatalf("Check refuses the official library's signature %s: %v", sig, err)
	}
	changed := bytes.Clone(body)
	changed[len(changed)-3] ^= 1
	if err := Check(VerifyStandardWebhooks, Secrets{Current: secret}, h, changed, epoch.Add(30*time.Second)); err != ErrBadProof {
		t.Errorf("Check of a body one byte off = %v, want ErrBadProof", err)
	}
}

func TestDeliveryID(t *testing.T) {
	long := strings.Repeat("a", MaxDeliveryIDBytes)
	for _, tc := range []struct {
		v       Verify
		h       http.Header
		want    string
		invalid bool
	}{
		{VerifyGitHub, header("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), "72d3162e-cc78-11e3-81ab-4c9367dc0958", false},
		{VerifyStandardWebhooks, header("webhook-id", "msg_1"), "msg_1", false},
		{VerifyToken, header("Idempotency-Key", "order 1"), "order 1", false},
		{VerifyToken, header("X-GitHub-Delivery", "x"), "", false}, // not this verify's header
		{VerifyGitHub, header(), "", false},
		{VerifyGitHub, header("X-GitHub-Delivery", long), long, false},
		{VerifyGitHub, header("X-GitHub-Delivery", long+"a"), "", true},
		{VerifyGitHub, header("X-GitHub-Delivery", "a\tb"), "", true},
		{VerifyGitHub, header("X-GitHub-Delivery", "a\x7fb"), "", true},
		{VerifyGitHub, header("X-GitHub-Delivery", "a\u0085b"), "", true},
		{VerifyGitHub, header("X-GitHub-Delivery", "a\xffb"), "", true},
		{VerifyGitHub, header("X-GitHub-Delivery", "a", "X-GitHub-Delivery", "b"), "", true},
		{VerifyStandardWebhooks, header("webhook-id", "été"), "été", false},
	} {
		got, err := DeliveryID(tc.v, tc.h)
		var field *runs.FieldError
		if got != tc.want || (err != nil) != tc.invalid || err != nil && !errors.As(err, &field) {
			t.Errorf("DeliveryID(%s, %v) = %q, %v; want %q, invalid %v", tc.v, tc.h, got, err, tc.want, tc.invalid)
		}
		if field != nil && field.Field == "" {
			t.Errorf("DeliveryID's error names no header: %v", err)
		}
	}
}

func TestEvent(t *testing.T) {
	for _, tc := range []struct {
		h    http.Header
		want string
	}{
		{header("X-GitHub-Event", "issues"), "issues"},
		{header("x-github-event", "ping"), "ping"},
		{header(), ""},
		{header("X-GitHub-Event", strings.Repeat("e", MaxDeliveryIDBytes+1)), ""},
		{header("X-GitHub-Event", "is\nsues"), ""},
		{header("X-GitHub-Event", "a", "X-GitHub-Event", "b"), ""},
	} {
		if got := Event(tc.h); got != tc.want {
			t.Errorf("Event(%v) = %q, want %q", tc.h, got, tc.want)
		}
	}
}
