package runs

// NewEvent returns an event of type t with payload data, for decoders. The
// supervisor stamps the envelope's other fields.
func NewEvent(t EventType, data any) Event {
	return Event{Type: t, Data: data}
}

// Unparsed is the agent.unparsed event of a line of output a decoder does
// not understand, with why: the line is kept whole (the supervisor bounds
// it), so that nothing the CLI said is lost.
func Unparsed(line []byte, reason string) Event {
	return NewEvent(EventAgentUnparsed, UnparsedData{Line: string(line), Bytes: len(line), Reason: reason})
}

// Warning is a warning event: something the run should know of that is
// not an error of the run.
func Warning(code, message string) Event {
	return NewEvent(EventWarning, WarningData{Code: code, Message: message})
}
