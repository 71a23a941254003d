package api

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
)

var autorunSeeds = []string{
	`{"name":"nightly","cron":"0 3 * * *","timezone":"Europe/Paris","run":{"agent":"claude","prompt":"hi"}}`,
	`{"name":"often","every":"10s","run":{"agent":"claude","prompt":"hi","promt":"x"},"when_busy":"queue","paused":true}`,
	`{"name":"gh","verify":"github","run":{"agent":"claude","prompt":"{{.payload.issue.title}}"},"when_busy":"skip"}`,
	`{"name":1}`, `{"run":null}`, `{"paused":"yes"}`, `[]`, `{"name":"x","name":"y"}`, `{"catch_up":"once","run":{}}`,
}

// The bodies of schedules and triggers are read like a run's: any bytes
// give a request or one 400 that names what is wrong, never a panic.
func FuzzScheduleAndTriggerRequests(f *testing.F) {
	for _, s := range autorunSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				return
			}
			var e *edgeError
			if !errors.As(err, &e) || e.status != http.StatusBadRequest || !slices.Contains(allCodes, e.code) || e.msg == "" {
				t.Fatalf("%s: error %v is not a 400 with a known code", what, err)
			}
			if e.code == CodeInvalidField && e.field == "" {
				t.Fatalf("%s: %s without a field", what, err)
			}
			if strings.HasPrefix(e.field, "run.") != strings.Contains(e.msg, `"run.`) && e.code != CodeInvalidJSON {
				t.Fatalf("%s: the field %q and the message %q disagree", what, e.field, e.msg)
			}
		}
		for _, c := range []struct {
			what   string
			known  []string
			decode func(fields) error
		}{
			{"schedule", scheduleFields, func(f fields) error { _, err := decodeScheduleRequest(f); return err }},
			{"schedule patch", scheduleFields, func(f fields) error { _, err := decodeSchedulePatch(f); return err }},
			{"trigger", triggerFields, func(f fields) error { _, err := decodeTriggerRequest(f); return err }},
			{"trigger patch", triggerFields, func(f fields) error { _, err := decodeTriggerPatch(f, false); return err }},
		} {
			members, err := readObject(body)
			var fs fields
			if err == nil {
				fs, err = byName(members, c.known)
			}
			if err == nil {
				err = c.decode(fs)
			}
			check(c.what, err)
		}
	})
}
