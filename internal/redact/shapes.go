package redact

import (
	"bytes"
	"encoding/base64"
)

// credentialSeparator is what stands between a credential's name and its
// value in env files, ini files, YAML, JSON (its quotes escaped or not)
// and Ruby hashes; in JSON its quotes are escaped once or twice, and '>'
// may be escaped as \u003e.
const credentialSeparator = `\\{0,3}["']?[ \t]*(?:=(?:>|\\{1,2}u003e)?|:)[ \t]*\\{0,3}["']?`

// awsSecretByName is an AWS secret access key after its name:
// aws_secret_access_key=…, AWS_SECRET_ACCESS_KEY: …, "SecretAccessKey": "…",
// --secret-access-key ….
const awsSecretByName = `(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key)(?:` + credentialSeparator + `|[ \t]+)` +
	`(?P<secret>[A-Za-z0-9/+=]{20,})`

var awsSecretAnchors = []string{"ccess_key", "CCESS_KEY", "ccessKey", "ccess-key", "ecret_key", "ECRET_KEY", "ecretKey", "ECRETKEY", "ccesskey"}

// awsSecretAfterID and awsSecretBeforeID are the 40 characters of an
// AWS secret access key without its name, on the line of its key id
// (a CSV of credentials, `aws configure list`, a script's arguments).
// A JSON escape (\t, \n) may stand before the secret.
const (
	awsSecretAfterID  = `(?:AKIA|ASIA)[0-9A-Z]{16}[^\n]{0,200}?(?:[^A-Za-z0-9/+=]|\\[nrt])(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`
	awsSecretBeforeID = `(?:^|[^A-Za-z0-9/+=]|\\[nrt])(?P<secret>[A-Za-z0-9/+]{40})[^A-Za-z0-9/+=][^\n]{0,200}?(?:AKIA|ASIA)[0-9A-Z]{16}`
)

// credentialAssignment is a value given to a name that says it is a
// credential: password=…, "api_key": "…", DB_SECRET: …, token => ….
const credentialAssignment = `(?i:password|passwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key|private[_-]?key|credentials?)` +
	credentialSeparator + `(?P<secret>[A-Za-z0-9._~+/=!@#$%^*-]{6,256})`

var credentialAnchors = []string{
	"assword", "ASSWORD", "asswd", "ASSWD", "ecret", "ECRET", "oken", "OKEN",
	"pi_key", "PI_KEY", "pi-key", "PI-KEY", "piKey", "pikey", "PIKEY",
	"ccess_key", "CCESS_KEY", "ccessKey", "ccess-key", "uth_key", "AUTH_KEY", "uthKey",
	"rivate_key", "RIVATE_KEY", "rivateKey", "redential", "REDENTIAL",
}

// looksLikeCredential tells a credential's value from code that names
// one (token = getToken(), password: string, secret: process.env.SECRET,
// max_tokens: 4096): it has letters and digits, or is long, mixed-case
// and not a dotted name.
func looksLikeCredential(v []byte) bool {
	upper, lower, digit := classes(v)
	if (upper || lower) && digit {
		return true
	}
	return len(v) >= 16 && upper && lower && !bytes.ContainsAny(v, ".")
}

// looksRandom tells 40 random base64 characters from a hex digest (a
// commit hash) or a word: both cases, and a digit or '/' or '+'.
func looksRandom(v []byte) bool {
	upper, lower, digit := classes(v)
	return upper && lower && (digit || bytes.ContainsAny(v, "/+"))
}

func hasDigitAndLetter(v []byte) bool {
	upper, lower, digit := classes(v)
	return digit && (upper || lower)
}

func classes(v []byte) (upper, lower, digit bool) {
	for _, c := range v {
		switch {
		case 'A' <= c && c <= 'Z':
			upper = true
		case 'a' <= c && c <= 'z':
			lower = true
		case '0' <= c && c <= '9':
			digit = true
		}
	}
	return upper, lower, digit
}

// isBasicCredentials reports whether v, after "Basic ", is base64 of
// user:password, not an English word ("basic support").
func isBasicCredentials(v []byte) bool {
	if len(v) < 8 || len(v)%4 != 0 {
		return false
	}
	var buf [768]byte
	if base64.StdEncoding.DecodedLen(len(v)) > len(buf) {
		return true // long enough to be nothing else
	}
	n, err := base64.StdEncoding.Decode(buf[:], v)
	return err == nil && bytes.IndexByte(buf[:n], ':') > 0
}
