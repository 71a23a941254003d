package codex

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/agenttest"
	"github.com/agentgate/agentgate/internal/mock/openai"
	"github.com/agentgate/agentgate/internal/runs"
)

// webp1x1 is a 1×1 lossless WebP: the standard library encodes none.
const webp1x1 = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

// typedImages writes a small image of each type the gateway accepts.
func typedImages(t *testing.T) []runs.Image {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, 3, 2), color.Palette{color.Black, color.White})
	img.SetColorIndex(1, 1, 1)
	var p, j, g bytes.Buffer
	if err := png.Encode(&p, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&j, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&g, img, nil); err != nil {
		t.Fatal(err)
	}
	w, err := base64.StdEncoding.DecodeString(webp1x1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out []runs.Image
	for _, im := range []struct {
		name, media string
		data        []byte
	}{{"a.png", "image/png", p.Bytes()}, {"b.jpg", "image/jpeg", j.Bytes()}, {"c.gif", "image/gif", g.Bytes()}, {"d.webp", "image/webp", w}} {
		path := filepath.Join(dir, im.name)
		if err := os.WriteFile(path, im.data, 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, runs.Image{Path: path, MediaType: im.media, Data: im.data})
	}
	return out
}

// testImage writes a small PNG, distinct per call, where the supervisor
// would (under the run's temporary directory), and returns it as the
// adapter gets it.
func testImage(t *testing.T) runs.Image {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	seed := uuid.New()
	for i := range img.Pix {
		img.Pix[i] = seed[i%len(seed)]
	}
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "attachment-1.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return runs.Image{Path: path, MediaType: "image/png", Data: buf.Bytes()}
}

// TestRealCLIImage runs a one-shot run whose prompt has an image: Codex
// reads the file (turn/start's localImage) and the mock model receives
// its bytes, base64 in a data URL.
func TestRealCLIImage(t *testing.T) {
	t.Parallel()
	im := testImage(t)
	images := imageRun(t, []runs.Image{im})
	if !images.Seen(base64.StdEncoding.EncodeToString(im.Data)) {
		t.Errorf("the model did not receive the image's bytes; image URLs seen: %d %.120q", len(images.URLs()), images.URLs())
	}
}

// TestRealCLIImageTypes gives one prompt a PNG, a JPEG, a GIF and a
// WebP: the model receives each, in order, as a data URL. codex 0.171.0
// passes PNG, JPEG and WebP through byte for byte, and re-encodes a GIF
// as a PNG of the same size.
func TestRealCLIImageTypes(t *testing.T) {
	t.Parallel()
	ims := typedImages(t)
	images := imageRun(t, ims)
	urls := images.URLs()
	if len(urls) != len(ims) {
		t.Fatalf("the model received %d images, want %d: %.80q", len(urls), len(ims), urls)
	}
	for i, im := range ims {
		if im.MediaType == "image/gif" {
			b, ok := strings.CutPrefix(urls[i], "data:image/png;base64,")
			png, err := base64.StdEncoding.DecodeString(b)
			if !ok || err != nil {
				t.Errorf("the GIF reached the model as %.100q, want a PNG data URL", urls[i])
				continue
			}
			cfg, _, err := image.DecodeConfig(bytes.NewReader(png))
			if err != nil || cfg.Width != 3 || cfg.Height != 2 {
				t.Errorf("the GIF's PNG is %+v, %v; want 3×2", cfg, err)
			}
			continue
		}
		if want := "data:" + im.MediaType + ";base64," + base64.StdEncoding.EncodeToString(im.Data); urls[i] != want {
			t.Errorf("image %d (%s) reached the model as %.100q, want %.100q", i, im.MediaType, urls[i], want)
		}
	}
}

// imageRun runs a one-shot run of the real codex whose prompt has
// images, driven by the decoder, and returns what the mock model saw.
func imageRun(t *testing.T, ims []runs.Image) *openai.Images {
	t.Helper()
	bin := codexBin(t)
	version := installedVersion(t, bin)
	srv, images, err := openai.StartWithImages("127.0.0.1:0", openai.TextAnswer("A small image."))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	home, dir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(mockConfig(srv.URL, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Dir: dir, Bin: bin, Home: home,
		Timeout: time.Minute, CLIVersion: version, Images: ims,
		Spec: runs.Spec{Prompt: "What is in the image?", Model: openai.DefaultModel, Permission: runs.WorkspaceWrite}}
	a := New()
	cmd, err := a.Command(inv)
	if err != nil {
		t.Fatal(err)
	}
	env := append(agenttest.MinimalEnv(home), cmd.Env...)
	env = append(env, testKeyEnv+"="+testKey)
	dec := a.NewDecoder(inv).(*decoder)
	conv := converse(t, bin, cmd.Args, env, dir, dec, cliCase{}, "agentgate-test-"+uuid.NewString())
	out := dec.Finish(conv.exit, []byte(conv.stderr))
	if out.Status != runs.Succeeded {
		t.Fatalf("outcome %s: %+v; stderr %q", out.Status, out.Error, tail(conv.stderr, 500))
	}
	if out.Result != "A small image." {
		t.Errorf("result %q", out.Result)
	}
	return images
}

// TestSessionImageFollowUp sends an image with the second message of an
// interactive run: the first turn's requests carry none, the second's
// carry its bytes.
func TestSessionImageFollowUp(t *testing.T) {
	t.Parallel()
	d := startSession(t, "image_follow_up", runs.Spec{Prompt: "Hello.", Interactive: true, Permission: runs.WorkspaceWrite},
		fixed(openai.TextAnswer("Seen.")))
	if tc := d.turn(); tc.Status != runs.Succeeded {
		t.Fatalf("turn 1: %+v", tc)
	}
	if n := len(d.images.URLs()); n != 0 {
		t.Fatalf("the first turn carried %d images, want none", n)
	}
	im := testImage(t)
	if err := d.dec.Send("What is in this image?", []runs.Image{im}, false); err != nil {
		t.Fatal(err)
	}
	d.flush()
	if tc := d.turn(); tc.Status != runs.Succeeded {
		t.Fatalf("turn 2: %+v", tc)
	}
	if !d.images.Seen(base64.StdEncoding.EncodeToString(im.Data)) {
		t.Errorf("the second turn's request did not carry the image's bytes; image URLs seen: %.120q", d.images.URLs())
	}
	d.dec.Close()
	d.flush()
	if o := d.end(); o.Status != runs.Succeeded || o.NumTurns != 2 {
		t.Errorf("outcome %s after %d turns: %+v", o.Status, o.NumTurns, o.Error)
	}
}
