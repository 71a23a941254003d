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
	inv := runs.Invocation{RunID: uuid.Must(uuid.NewV7()).String(), Dir: dir, Bin: bin, Home: home, Files: runs.HostFiles{},
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
	conv := converse(t, bin, cmd.Args, env, dir, dec, cliCase{}, "agentgate-test-"+uuid.NewString(), func() bool { return false })
	out := dec.Finish(conv.exit, []byte(conv.stderr))
	if out.Status != runs.Succeeded {
		t.Fatalf("outcome %s: %+v; stderr %q", out.Status, out.Error, tail(conv.stderr, 500))
	}
	// The images' user message is an item the decoder must know.
	for _, ev := range append(conv.events, out.Events...) {
		if ev.Type == runs.EventAgentUnparsed {
			t.Errorf("unparsed: %+v", ev.Data)
		}
	}
	if out.Result != "A small image." {
		t.Errorf("result %q", out.Result)
	}
	return images
}
