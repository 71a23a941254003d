package runs

// NewEvent returns an event of type t with payload data, for decoders. The
// supervisor stamps the envelope's other fields.
func NewEvent(t EventType, data any) Event {
	return Event{Type: t, Data: data}
}
