package redact

import (
	"fmt"

	"go.uber.org/zap/zapcore"
)

// Core returns a zapcore.Core that redacts every entry before inner
// writes it: the message, and the fields of type string, byte string,
// error and fmt.Stringer, also inside arrays and objects that marshal
// themselves (zap.Strings, zap.Object, zap.Array). Fields of other types
// (numbers, durations, binary, zap.Any of a struct encoded by reflection)
// pass as they are: do not log secrets that way. Fields given to With are
// redacted once, when they are added.
//
// Core decides by level only: it registers itself, not inner, with the
// checked entry, so that inner never sees an unredacted entry. Put a
// sampler around it, not inside it. A nil r returns inner.
func Core(inner zapcore.Core, r *Redactor) zapcore.Core {
	if r == nil {
		return inner
	}
	return &core{Core: inner, r: r}
}

type core struct {
	zapcore.Core
	r *Redactor
}

// Level keeps the inner core's level visible to zap's LevelOf.
func (c *core) Level() zapcore.Level { return zapcore.LevelOf(c.Core) }

func (c *core) With(fs []zapcore.Field) zapcore.Core {
	return &core{Core: c.Core.With(c.fields(fs)), r: c.r}
}

func (c *core) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *core) Write(e zapcore.Entry, fs []zapcore.Field) error {
	e.Message = c.r.String(e.Message)
	return c.Core.Write(e, c.fields(fs))
}

// fields returns fs redacted; fs itself when nothing changes.
func (c *core) fields(fs []zapcore.Field) []zapcore.Field {
	var out []zapcore.Field
	for i, f := range fs {
		g, changed := c.field(f)
		if !changed {
			if out != nil {
				out = append(out, f)
			}
			continue
		}
		if out == nil {
			out = append(make([]zapcore.Field, 0, len(fs)), fs[:i]...)
		}
		out = append(out, g)
	}
	if out == nil {
		return fs
	}
	return out
}

func (c *core) field(f zapcore.Field) (zapcore.Field, bool) {
	switch f.Type {
	case zapcore.StringType:
		if s := c.r.String(f.String); s != f.String {
			f.String = s
			return f, true
		}
	case zapcore.ByteStringType:
		if b, ok := f.Interface.([]byte); ok {
			if s := c.r.String(string(b)); s != string(b) {
				return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: s}, true
			}
		}
	case zapcore.ErrorType:
		if err, ok := f.Interface.(error); ok {
			if msg, ok := safeString(err.Error); ok && c.r.Contains(msg) {
				return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: c.r.String(msg)}, true
			}
		}
	case zapcore.StringerType:
		if st, ok := f.Interface.(fmt.Stringer); ok {
			if msg, ok := safeString(st.String); ok && c.r.Contains(msg) {
				return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: c.r.String(msg)}, true
			}
		}
	case zapcore.ArrayMarshalerType:
		if m, ok := f.Interface.(zapcore.ArrayMarshaler); ok {
			f.Interface = array{m, c.r}
			return f, true
		}
	case zapcore.ObjectMarshalerType, zapcore.InlineMarshalerType:
		if m, ok := f.Interface.(zapcore.ObjectMarshaler); ok {
			f.Interface = object{m, c.r}
			return f, true
		}
	}
	return f, false
}

// safeString calls s, as zap would, without letting its panic through;
// ok is false when it panicked (zap then logs the panic itself).
func safeString(s func() string) (v string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return s(), true
}

// object and array marshal their inner value through encoders that
// redact the strings written to them.
type object struct {
	m zapcore.ObjectMarshaler
	r *Redactor
}

func (o object) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	return o.m.MarshalLogObject(objectEncoder{enc, o.r})
}

type array struct {
	m zapcore.ArrayMarshaler
	r *Redactor
}

func (a array) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	return a.m.MarshalLogArray(arrayEncoder{enc, a.r})
}

type objectEncoder struct {
	zapcore.ObjectEncoder
	r *Redactor
}

func (e objectEncoder) AddString(k, v string) { e.ObjectEncoder.AddString(k, e.r.String(v)) }
func (e objectEncoder) AddByteString(k string, v []byte) {
	e.ObjectEncoder.AddString(k, e.r.String(string(v)))
}
func (e objectEncoder) AddArray(k string, v zapcore.ArrayMarshaler) error {
	return e.ObjectEncoder.AddArray(k, array{v, e.r})
}
func (e objectEncoder) AddObject(k string, v zapcore.ObjectMarshaler) error {
	return e.ObjectEncoder.AddObject(k, object{v, e.r})
}

type arrayEncoder struct {
	zapcore.ArrayEncoder
	r *Redactor
}

func (e arrayEncoder) AppendString(v string) { e.ArrayEncoder.AppendString(e.r.String(v)) }
func (e arrayEncoder) AppendByteString(v []byte) {
	e.ArrayEncoder.AppendString(e.r.String(string(v)))
}
func (e arrayEncoder) AppendArray(v zapcore.ArrayMarshaler) error {
	return e.ArrayEncoder.AppendArray(array{v, e.r})
}
func (e arrayEncoder) AppendObject(v zapcore.ObjectMarshaler) error {
	return e.ArrayEncoder.AppendObject(object{v, e.r})
}
