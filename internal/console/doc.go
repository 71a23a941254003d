// Package console owns the gateway's web console: the static page, styles
// and ES modules under static/, embedded in the binary, and the handler
// that serves them.
//
// The console is hand-written HTML, CSS and JavaScript modules with no
// build step, so the embedded files are the source. It talks to the
// gateway only through the public API, from the same origin: the page
// itself carries no secret and is served without a key, while every API
// call it makes carries the key the user typed (kept in sessionStorage)
// as Authorization: Bearer, and its event streams use stream tokens
// (POST /v1/runs/{id}/stream-token, then ?token=), since EventSource
// cannot send headers. Without a keys file the gateway serves one
// anonymous tenant on loopback and the console works with no key.
//
// Handler serves every file with its content type, an ETag (the SHA-256
// of its bytes) and Cache-Control: no-cache, so that a browser
// revalidates cheaply and never runs a stale module after an upgrade; a
// Content-Security-Policy that allows only the console's own scripts,
// styles and connections (no inline script, no eval, no frames) and
// lets only the Markdown renderer's Trusted Types policy write HTML; and
// X-Content-Type-Options: nosniff.
package console
