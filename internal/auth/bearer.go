package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrInvalidAuthorization is an Authorization header that is present but
// not one bearer token; the API answers it 401 invalid_authorization.
var ErrInvalidAuthorization = errors.New("invalid authorization header")

// ParseBearer returns the token of the request's Authorization header.
// No header is ok=false and no error (the caller decides whether
// anonymous requests are allowed). Anything else that is not exactly one
// header "Bearer <token>" (scheme case-insensitive, one or more spaces,
// a token of 1 to MaxTokenLen characters of RFC 6750's b64token:
// A-Z a-z 0-9 - . _ ~ + / then optional trailing =) is an error wrapping
// ErrInvalidAuthorization. The error never quotes the header.
func ParseBearer(h http.Header) (secret string, ok bool, err error) {
	vs := h.Values("Authorization")
	switch len(vs) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", false, fmt.Errorf("%w: %d Authorization headers", ErrInvalidAuthorization, len(vs))
	}
	v := strings.Trim(vs[0], " \t")
	scheme, tok, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false, fmt.Errorf("%w: want Bearer <token>", ErrInvalidAuthorization)
	}
	tok = strings.TrimLeft(tok, " ")
	if len(tok) == 0 || len(tok) > MaxTokenLen {
		return "", false, fmt.Errorf("%w: token of %d bytes, want 1 to %d", ErrInvalidAuthorization, len(tok), MaxTokenLen)
	}
	if !b64token(tok) {
		return "", false, fmt.Errorf("%w: token has characters outside A-Z a-z 0-9 - . _ ~ + / =", ErrInvalidAuthorization)
	}
	return tok, true, nil
}

// b64token reports whether s is RFC 6750's b64token.
func b64token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
