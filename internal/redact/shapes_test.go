package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// awsSecret is the secret access key of AWS's documentation.
const awsSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

// awsSecretForms are the ways tools print an AWS secret access key.
var awsSecretForms = []string{
	"aws_secret_access_key=" + awsSecret,
	"aws_secret_access_key = " + awsSecret, // ~/.aws/credentials
	"AWS_SECRET_ACCESS_KEY=" + awsSecret,
	`export AWS_SECRET_ACCESS_KEY="` + awsSecret + `"`,
	"AWS_SECRET_ACCESS_KEY: " + awsSecret, // YAML
	"secret_access_key: '" + awsSecret + "'",
	`{"SecretAccessKey": "` + awsSecret + `", "SessionToken": "x"}`,
	`{"Credentials":{"AccessKeyId":"ASIAIOSFODNN7EXAMPLE","SecretAccessKey":"` + awsSecret + `"}}`,
	"secretAccessKey: \"" + awsSecret + "\"",
	"aws configure set aws_secret_access_key " + awsSecret,
	"--secret-access-key " + awsSecret,
	":aws_secret_key => '" + awsSecret + "'",
	// No name: the shape, on the line of its key id.
	"AKIAIOSFODNN7EXAMPLE," + awsSecret,
	"User,AKIAIOSFODNN7EXAMPLE,\t" + awsSecret + ",console",
	"key AKIAIOSFODNN7EXAMPLE secret " + awsSecret + "\n",
	awsSecret + " AKIAIOSFODNN7EXAMPLE",
}

// TestAWSSecretAccessKey: the built-in patterns hide an AWS secret access
// key after its name, in every common syntax, and next to its key id,
// in text, in an event's JSON, in a line of JSON quoted in an event, and
// streamed in pieces.
func TestAWSSecretAccessKey(t *testing.T) {
	r := mustNew(t, Options{})
	for _, in := range awsSecretForms {
		assertHidden(t, r, in, awsSecret)
		assertStreamHides(t, r, in, awsSecret)
	}
}

// newShapes are the built-in shapes besides the AWS secret, each a secret
// and the text it is printed in.
var newShapes = []struct{ name, text, secret string }{
	{"gitlab", "token glpat-" + strings.Repeat("aB3_", 5) + " ok", "glpat-" + strings.Repeat("aB3_", 5)},
	{"slack user", "xoxp-1234567890-" + strings.Repeat("a1", 8), "xoxp-1234567890-" + strings.Repeat("a1", 8)},
	{"slack app", "xapp-1-A0123456789-" + strings.Repeat("9f", 10), "xapp-1-A0123456789-" + strings.Repeat("9f", 10)},
	{"slack webhook", "POST https://hooks.slack.com/services/T00000000/B00000000/" + strings.Repeat("X", 24), "T00000000/B00000000/" + strings.Repeat("X", 24)},
	{"stripe", "sk_live_" + strings.Repeat("4eC39Hq", 4), "sk_live_" + strings.Repeat("4eC39Hq", 4)},
	{"stripe restricted", "rk_test_" + strings.Repeat("4eC39Hq", 4), "rk_test_" + strings.Repeat("4eC39Hq", 4)},
	{"webhook secret", "whsec_" + strings.Repeat("MfKQ9r8G", 4), "whsec_" + strings.Repeat("MfKQ9r8G", 4)},
	{"npm", "//registry.npmjs.org/:_authToken=npm_" + strings.Repeat("a1B2", 9), "npm_" + strings.Repeat("a1B2", 9)},
	{"hugging face", "HF_TOKEN hf_" + strings.Repeat("AbCd", 9), "hf_" + strings.Repeat("AbCd", 9)},
	{"sendgrid", "SG." + strings.Repeat("ngeVfQ", 4) + "." + strings.Repeat("TaP9x_-", 6), "SG." + strings.Repeat("ngeVfQ", 4) + "." + strings.Repeat("TaP9x_-", 6)},
	{"twilio", "SK" + strings.Repeat("0a1b2c3d", 4), "SK" + strings.Repeat("0a1b2c3d", 4)},
	{"azure", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=" + strings.Repeat("Eby8vdM0", 11) + "==;", strings.Repeat("Eby8vdM0", 11) + "=="},
	{"google oauth", "client GOCSPX-" + strings.Repeat("1a2B", 7), "GOCSPX-" + strings.Repeat("1a2B", 7)},
	{"google access token", "ya29." + strings.Repeat("a0AfH6S", 5), "ya29." + strings.Repeat("a0AfH6S", 5)},
	{"jwt", "cookie=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;",
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"},
	{"private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA" + strings.Repeat("q3N8", 30) + "\n" + strings.Repeat("Zx+/", 16) + "\n-----END RSA PRIVATE KEY-----\n",
		"MIIEowIBAAKCAQEA"},
	{"openssh key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA" + strings.Repeat("Bm9uZQ", 8) + "\n-----END OPENSSH PRIVATE KEY-----",
		"b3BlbnNzaC1rZXktdjEAAAAA"},
	{"url password", "git clone https://deploy:Gh0st-Pass9@git.example.com/repo.git", "Gh0st-Pass9"},
	{"basic auth", "Authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"},
	{"password", "DB_PASSWORD=hunter22x", "hunter22x"},
	{"password yaml", "  password: \"s3cr3t-Pa55\"", "s3cr3t-Pa55"},
	{"api key json", `{"api_key": "a1b2c3d4e5f6"}`, "a1b2c3d4e5f6"},
	{"secret ruby", ":client_secret => 'x9y8z7w6v5'", "x9y8z7w6v5"},
	{"token ini", "auth_token = 7f3kd92mvq", "7f3kd92mvq"},
	{"access token query", "GET /cb?code=1&access_token=Qm9vbTEyMzQ1&x=1", "Qm9vbTEyMzQ1"},
	{"apiKey", "const apiKey = 'AbCdEfGhIjKlMnOpQr'", "AbCdEfGhIjKlMnOpQr"},
}

func TestNewBuiltinShapes(t *testing.T) {
	r := mustNew(t, Options{})
	for _, c := range newShapes {
		t.Run(c.name, func(t *testing.T) {
			assertHidden(t, r, c.text, c.secret)
			assertStreamHides(t, r, c.text, c.secret)
		})
	}
	// The name stays, so that a reader sees what was hidden.
	for in, want := range map[string]string{
		"DB_PASSWORD=hunter22x":                                                  "DB_PASSWORD=" + Mark,
		`{"api_key": "a1b2c3d4e5f6"}`:                                            `{"api_key": "` + Mark + `"}`,
		"https://deploy:Gh0st-Pass9@git.example.com/x":                           "https://deploy:" + Mark + "@git.example.com/x",
		"aws_secret_access_key = " + awsSecret:                                   "aws_secret_access_key = " + Mark,
		"-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----": "-----BEGIN PRIVATE KEY-----" + Mark + "-----END PRIVATE KEY-----",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOrdinaryTextStays: code and text that only look like credentials
// (digests, ids, base64 data, code naming a credential) are not marked.
func TestOrdinaryTextStays(t *testing.T) {
	r := mustNew(t, Options{})
	for _, plain := range []string{
		"commit 3f786850e387550fdab836ed7e6dc881de23001b",
		"Merge: 3f78685 e387550\nAuthor: A <a@example.com>",
		"id 123e4567-e89b-12d3-a456-426614174000 done",
		"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"github.com/x/y v1.2.3 h1:4/GrhJbGJp0qbLAcuGyTjXc1WAmVxuxUKSmGmZOeNrM=",
		`const logo = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="`,
		"AKIAIOSFODNN7EXAMPLE", // the id itself is marked; see below
		"token = getToken()",
		"password: string",
		"const secret = process.env.SECRET",
		`api_key=os.environ["OPENAI_API_KEY"]`,
		"max_tokens: 4096",
		`{"input_tokens":1234,"output_tokens":56}`,
		"secret: ${{ secrets.DEPLOY_KEY }}",
		"api_key=YOUR_API_KEY",
		"Basic support for streaming",
		"the basic idea",
		"git@github.com:org/repo.git",
		"see https://example.com:8443/path?q=1",
		"passwordless login; tokenizer; secrets manager",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"ask for the task skill-set",
	} {
		want := plain
		if plain == "AKIAIOSFODNN7EXAMPLE" {
			want = Mark
		}
		if got := r.String(plain); got != want {
			t.Errorf("String(%q) = %q, want it unchanged", plain, got)
		}
	}
	// A commit hash on the line of an access key id is not its secret.
	line := "AKIAIOSFODNN7EXAMPLE 3f786850e387550fdab836ed7e6dc881de23001b"
	if got := r.String(line); got != Mark+" 3f786850e387550fdab836ed7e6dc881de23001b" {
		t.Errorf("String(%q) = %q", line, got)
	}
}

// TestRedactingTwiceChangesNothing: the marks the built-in patterns leave
// are not secrets themselves.
func TestRedactingTwiceChangesNothing(t *testing.T) {
	r := mustNew(t, Options{})
	texts := slicesOf(awsSecretForms)
	for _, c := range newShapes {
		texts = append(texts, c.text)
	}
	for _, in := range texts {
		once := r.String(in)
		if twice := r.String(once); twice != once {
			t.Errorf("String(%q) = %q, then %q", in, once, twice)
		}
		doc := encode(t, map[string]string{"output": in})
		onceB := r.Bytes(doc)
		if twice := r.Bytes(onceB); !bytes.Equal(twice, onceB) {
			t.Errorf("Bytes(%s) = %s, then %s", doc, onceB, twice)
		}
	}
}

func slicesOf(s []string) []string { return append([]string(nil), s...) }

// assertHidden checks that r hides secret in text as it is, inside an
// event's JSON, and inside a line of JSON quoted in an event's JSON.
func assertHidden(t *testing.T, r *Redactor, text, secret string) {
	t.Helper()
	if got := r.String(text); strings.Contains(got, secret) || !strings.Contains(got, Mark) {
		t.Errorf("String(%q) = %q", text, got)
	}
	doc := encode(t, map[string]string{"output": text})
	if got := r.Bytes(doc); bytes.Contains(got, []byte(secret)) || !bytes.Contains(got, []byte(Mark)) {
		t.Errorf("Bytes(%s) = %s", doc, got)
	}
	inner := encode(t, map[string]string{"out": text})
	outer := encode(t, map[string]string{"line": string(inner)})
	if got := r.Bytes(outer); bytes.Contains(got, []byte(secret)) || !bytes.Contains(got, []byte(Mark)) {
		t.Errorf("Bytes(%s) = %s", outer, got)
	}
}

// assertStreamHides splits text in two and in three pieces at every
// point and checks that what the stream shows adds up to the redacted
// whole.
func assertStreamHides(t *testing.T, r *Redactor, text, secret string) {
	t.Helper()
	want := r.String(text)
	for i := 0; i <= len(text); i++ {
		for _, j := range []int{i, (i + len(text)) / 2, min(i+3, len(text))} {
			s := r.Stream()
			var got strings.Builder
			for _, p := range []string{text[:i], text[i:j], text[j:]} {
				out := s.Write(p)
				if !utf8.ValidString(out) {
					t.Fatalf("split %d,%d: a piece cuts a rune: %q", i, j, out)
				}
				got.WriteString(out)
			}
			got.WriteString(s.Flush())
			if got.String() != want || strings.Contains(got.String(), secret) {
				t.Fatalf("split %d,%d of %q: %q, want %q", i, j, text, got.String(), want)
			}
		}
	}
}

// FuzzBuiltins: the built-in patterns never panic, redacting what they
// redacted changes nothing (in text and in JSON), and a text streamed in
// three pieces comes out as it does whole.
func FuzzBuiltins(f *testing.F) {
	for _, s := range awsSecretForms {
		f.Add(s, len(s)/2, len(s)-3)
	}
	for _, c := range newShapes {
		f.Add(c.text, len(c.text)/3, len(c.text)/2)
	}
	f.Add("Bearer abc.def AKIAIOSFODNN7EXAMPLE\t-----BEGIN PRIVATE KEY-----\nAAAA", 7, 30)
	f.Add(`{"password":"[REDACTED]1x","token":"a\"b1cdefg"}`, 3, 9)
	r := mustNew(f, Options{})
	f.Fuzz(func(t *testing.T, text string, i, j int) {
		once := r.String(text)
		if twice := r.String(once); twice != once {
			t.Errorf("String(%q) = %q, then %q", text, once, twice)
		}
		if doc := []byte(text); json.Valid(doc) {
			onceB := r.Bytes(doc)
			if twice := r.Bytes(onceB); !bytes.Equal(twice, onceB) {
				t.Errorf("Bytes(%s) = %s, then %s", doc, onceB, twice)
			}
		}
		if len(text) > StreamHold {
			return // a match longer than the hold may be split: see StreamHold
		}
		i, j = clamp(i, len(text)), clamp(j, len(text))
		i, j = min(i, j), max(i, j)
		s := r.Stream()
		got := s.Write(text[:i]) + s.Write(text[i:j]) + s.Write(text[j:]) + s.Flush()
		if got != once {
			t.Errorf("streamed in pieces at %d and %d, %q is %q; whole, %q", i, j, text, got, once)
		}
	})
}

func clamp(i, n int) int {
	if i < 0 {
		i = -i
	}
	if n == 0 {
		return 0
	}
	return i % (n + 1)
}

// TestManyPatterns: patterns past what the anchor index tracks are still
// tried, and each pattern's anchor is found wherever it is.
func TestManyPatterns(t *testing.T) {
	var pats []string
	for i := range maxIndexed + 40 {
		pats = append(pats, fmt.Sprintf("corp%03d-[0-9]{6}", i))
	}
	r := mustNew(t, Options{Patterns: pats})
	for _, i := range []int{0, 17, maxIndexed - 1, maxIndexed, maxIndexed + 39} {
		in := fmt.Sprintf("x corp%03d-123456 y", i)
		if got := r.String(in); got != "x "+Mark+" y" {
			t.Errorf("String(%q) = %q", in, got)
		}
	}
}
