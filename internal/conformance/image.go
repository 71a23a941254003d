package conformance

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// imageWithin bounds a run with images, or the first turn of one: an
// adapter may check the CLI's configuration for image input before the
// run, which starts a slow CLI once more (OpenCode's preflight does).
const imageWithin = 2 * quick

// imageCases are the cases of images given to a run: with its prompt and,
// for an agent that takes interactive runs, with a follow-up message. For
// an agent that does not take attachments, a case checks that it refuses
// them by name.
func (s *suite) imageCases() []suiteCase {
	d := s.adapter.Describe()
	if !slices.Contains(d.Fields, runs.FieldAttachments) {
		return []suiteCase{{"image_refused", s.imageRefused}}
	}
	cases := []suiteCase{{"image_prompt", s.imagePrompt}}
	switch {
	case !slices.Contains(d.Fields, runs.FieldInteractive):
	case d.Interaction.MessageAttachments:
		cases = append(cases, suiteCase{"image_follow_up", s.imageFollowUp})
	default:
		cases = append(cases, suiteCase{"image_follow_up_refused", s.imageFollowUpRefused})
	}
	return cases
}

// testImage is a small real PNG of its own pixels, so that its base64 is
// found in a model request only if this image was sent.
func testImage(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for i := range img.Pix {
		img.Pix[i] = byte(rnd.Uint32())
	}
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff
	}
	img.Set(0, 0, color.NRGBA{R: 1, G: 2, B: 3, A: 0xff})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imageRefused: an agent without attachments says so by name.
func (s *suite) imageRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "hi"}, credentials)
	_, err := g.sup.Submit(context.Background(), runs.Spec{Agent: s.adapter.Name(), Prompt: "hi",
		Attachments: []runs.Attachment{{MediaType: "image/png", Data: testImage(t)}}})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldAttachments || !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("attachments: %v, want unsupported_option naming them", err)
	}
}

// imagePrompt: an inline PNG with the prompt reaches the model, and the
// run's events name it without carrying it.
func (s *suite) imagePrompt(t *testing.T) {
	g := s.start(t, Scenario{Kind: Text, Text: "I see a square."}, credentials)
	img := testImage(t)
	b64 := base64.StdEncoding.EncodeToString(img)
	r := g.submit(t, runs.Spec{Prompt: "What is in the image?", Attachments: []runs.Attachment{
		{MediaType: "image/png", Name: "square.png", Data: img},
	}})
	if len(r.Spec.Attachments) != 1 || !files.ValidID(r.Spec.Attachments[0].FileID) {
		t.Fatalf("the run keeps attachments %+v", r.Spec.Attachments)
	}
	r, evs := g.wait(t, r.ID, imageWithin)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	if !g.backend.Seen(b64) {
		t.Errorf("no model request carried the image (%d bytes of PNG)", len(img))
	}
	if !strings.Contains(r.Result, "square") {
		t.Errorf("result %q", r.Result)
	}
	g.wantNoImageBytes(t, evs, b64)
	started := of(evs, runs.EventRunStarted)
	if len(started) != 1 {
		t.Fatalf("run.started: %s", typesOf(evs))
	}
	var d runs.RunStartedData
	decode(t, started[0], &d)
	if len(d.Attachments) != 1 || d.Attachments[0].FileID != r.Spec.Attachments[0].FileID ||
		d.Attachments[0].MediaType != "image/png" || d.Attachments[0].Size != int64(len(img)) {
		t.Errorf("run.started names attachments %+v", d.Attachments)
	}
	g.wantUsage(t, r)
}

// imageFollowUp: an uploaded PNG with a follow-up message of an
// interactive run reaches the model in that turn.
func (s *suite) imageFollowUp(t *testing.T) {
	g := s.start(t, Scenario{Kind: Turns, Text: "noted"}, credentials)
	img := testImage(t)
	b64 := base64.StdEncoding.EncodeToString(img)
	f, err := g.sup.UploadFile(context.Background(), "follow.png", "image/png", img)
	if err != nil {
		t.Fatal(err)
	}
	r := g.submit(t, runs.Spec{Prompt: "I will show you an image next.", Interactive: true})
	g.waitEvents(t, r.ID, runs.EventTurnCompleted, 1, imageWithin)
	if g.backend.Seen(b64) {
		t.Fatal("the image reached the model before it was sent")
	}
	msg := g.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "Here it is: what do you see?",
		Attachments: []runs.Attachment{{FileID: f.ID}}})
	two := g.turn(t, r.ID, 2)
	if two.Status != runs.Succeeded {
		t.Fatalf("turn 2 = %+v", two)
	}
	if !g.backend.Seen(b64) {
		t.Errorf("no model request carried the follow-up's image (%d bytes of PNG)", len(img))
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	r, evs := g.wait(t, r.ID, stopWithin)
	if r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
	g.wantNoImageBytes(t, evs, b64)
	named := false
	for _, ev := range of(evs, runs.EventTurnStarted) {
		var d runs.TurnStartedData
		decode(t, ev, &d)
		if d.MessageID == msg.MessageID {
			named = len(d.Attachments) == 1 && d.Attachments[0].FileID == f.ID
		}
	}
	if !named {
		t.Errorf("turn 2's turn.started does not name the file %s: %s", f.ID, dump(evs, runs.EventTurnStarted))
	}
}

// imageFollowUpRefused: an agent whose messages take no images refuses a
// message with one by name, and its session goes on: the next message,
// without the image, has its turn.
func (s *suite) imageFollowUpRefused(t *testing.T) {
	g := s.start(t, Scenario{Kind: Turns, Text: "noted"}, credentials)
	f, err := g.sup.UploadFile(context.Background(), "follow.png", "image/png", testImage(t))
	if err != nil {
		t.Fatal(err)
	}
	r := g.submit(t, runs.Spec{Prompt: "I will show you an image next.", Interactive: true})
	g.waitEvents(t, r.ID, runs.EventTurnCompleted, 1, imageWithin)
	_, err = g.sup.Input(context.Background(), r.ID, runs.Input{Kind: runs.InputMessage, Text: "Here it is.",
		Attachments: []runs.Attachment{{FileID: f.ID}}})
	var fe *runs.FieldError
	if !errors.As(err, &fe) || fe.Field != runs.FieldAttachments || !errors.Is(err, runs.ErrUnsupported) {
		t.Fatalf("a message with an image: %v, want unsupported_option naming attachments", err)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputMessage, Text: "No image then: say noted."})
	if two := g.turn(t, r.ID, 2); two.Status != runs.Succeeded {
		t.Fatalf("turn 2 = %+v", two)
	}
	g.input(t, r.ID, runs.Input{Kind: runs.InputClose})
	if r, evs := g.wait(t, r.ID, stopWithin); r.Status != runs.Succeeded {
		t.Fatalf("status %s, error %+v; events %s", r.Status, r.Error, typesOf(evs))
	}
}

// wantNoImageBytes checks that no event carries the image.
func (g *gateway) wantNoImageBytes(t *testing.T, evs []runs.Event, b64 string) {
	t.Helper()
	for _, ev := range evs {
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), b64[:64]) {
			t.Errorf("event %d (%s) carries the image's bytes", ev.Seq, ev.Type)
		}
	}
}
