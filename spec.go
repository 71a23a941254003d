// Package agentgate holds what the gateway serves about itself: its API
// description, so that the running gateway answers GET /openapi.yaml with
// the very file its tests hold the routes to.
package agentgate

import _ "embed"

// OpenAPI is openapi.yaml, the whole HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte

// EventsSchema is events.schema.json, the JSON Schema of every event
// envelope, which openapi.yaml refers to as ./events.schema.json.
//
//go:embed events.schema.json
var EventsSchema []byte
