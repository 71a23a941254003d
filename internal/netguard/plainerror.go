package netguard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// net/http answers a request it cannot parse (a malformed Host, headers
// too large, a bad Transfer-Encoding) itself, before any handler, in plain
// text: "HTTP/1.1 400 Bad Request" then exactly these headers, with no
// Date, and the status again as the body, in one write to the connection.
// A client that branches on the gateway's JSON error codes would meet the
// one answer it cannot read, so the connection rewrites that write into
// the gateway's error shape. A handler's answer always carries a Date (and
// the API's a JSON content type), so it never matches.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// plainErrorCodes are the machine codes of the statuses net/http answers
// on its own; any other status gets "bad_request".
var plainErrorCodes = map[int]string{
	400: "bad_request",
	417: "expectation_failed",
	431: "headers_too_large",
	501: "not_implemented",
	505: "http_version_not_supported",
}

// rewritePlainError returns p as a JSON error response, and true, if it is
// one of net/http's own plain-text error answers.
func rewritePlainError(p []byte) ([]byte, bool) {
	rest, ok := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !ok {
		return nil, false
	}
	i := bytes.Index(rest, []byte(plainErrorHeaders))
	if i < 3 || bytes.IndexByte(rest[:i], '\r') >= 0 || bytes.IndexByte(rest[:i], '\n') >= 0 {
		return nil, false
	}
	statusLine, body := rest[:i], rest[i+len(plainErrorHeaders):]
	if len(statusLine) > 3 && statusLine[3] != ' ' {
		return nil, false
	}
	for _, b := range statusLine {
		if b < 0x20 || b > 0x7e {
			return nil, false
		}
	}
	status, err := strconv.Atoi(string(statusLine[:3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	code, ok := plainErrorCodes[status]
	if !ok {
		code = "bad_request"
	}
	msg := string(body)
	if msg == "" {
		msg = string(statusLine)
	}
	b, _ := json.Marshal(map[string]map[string]string{"error": {"code": code, "message": "the request could not be read: " + msg}})
	b = append(b, '\n')
	return fmt.Appendf(nil, "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		statusLine, len(b), b), true
}
