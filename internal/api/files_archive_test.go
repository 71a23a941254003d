package api

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// tarBytes returns a tar of one file of size bytes.
func tarBytes(t testing.TB, size int) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: "main.go", Mode: 0o644, Size: int64(size), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(bytes.Repeat([]byte("x"), size))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zipBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("src/main.go")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("package main\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// uploaded posts body as a file declared as ct, decodes the 201's file,
// and holds it to openapi.yaml's File.
func uploaded(t *testing.T, h *harness, body, ct string) fileResponse {
	t.Helper()
	resp, b := h.do(t, "POST", "/v1/files", body, "Content-Type", ct)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	validateOpenAPI(t, "File", b)
	var f fileResponse
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Each archive type is uploaded, raw or as a form's part, declared or
// not, and read back as an archive.
func TestUploadArchives(t *testing.T) {
	h := newHarness(t, Config{}, newFileFake(&fakeService{}))
	tarred := tarBytes(t, 100)
	form, formCT := multipartBody(t, "file", "repo.tgz", "application/x-gzip", gzipBytes(t, tarred))
	cases := []struct {
		name, body, ct string
		want           string
	}{
		{"tar", string(tarred), "application/x-tar", files.Tar},
		{"tar.gz in a form, as x-gzip", form, formCT, files.Gzip},
		{"tar.gz as x-compressed-tar", string(gzipBytes(t, tarred)), "application/x-compressed-tar", files.Gzip},
		{"zip, undeclared", string(zipBytes(t)), "application/octet-stream", files.Zip},
	}
	for _, c := range cases {
		f := uploaded(t, h, c.body, c.ct)
		if f.Kind != files.KindArchive || f.MediaType != c.want || f.Width != 0 {
			t.Errorf("%s: uploaded %+v, want an archive %s", c.name, f, c.want)
			continue
		}
		resp, b := h.do(t, "GET", "/v1/files/"+f.ID+"/content", "")
		if resp.StatusCode != http.StatusOK || int64(len(b)) != f.Size || resp.Header.Get("Content-Type") != c.want ||
			resp.Header.Get("Content-Disposition") != "attachment" {
			t.Errorf("%s: content %d, %d bytes, %v", c.name, resp.StatusCode, len(b), resp.Header)
		}
	}
	img := uploaded(t, h, string(pngBytes(t)), "image/png")
	if img.Kind != files.KindImage || img.Width != 3 || img.Height != 2 {
		t.Errorf("uploaded an image as %+v", img)
	}
	for name, c := range map[string]struct{ body, ct string }{
		"zip declared tar":    {string(zipBytes(t)), "application/x-tar"},
		"tar declared gzip":   {string(tarred), "application/gzip"},
		"png declared zip":    {string(pngBytes(t)), "application/zip"},
		"zip declared png":    {string(zipBytes(t)), "image/png"},
		"gzip of no tar":      {string(gzipBytes(t, bytes.Repeat([]byte("text "), 200))), "application/gzip"},
		"7z, undeclared":      {"7z\xbc\xaf\x27\x1c", "application/octet-stream"},
		"rar, declared as is": {"Rar!\x1a\x07\x00", "application/vnd.rar"},
	} {
		resp, b := h.do(t, "POST", "/v1/files", c.body, "Content-Type", c.ct)
		if resp.StatusCode != http.StatusBadRequest || errDetail(t, b).Code != CodeInvalidAttachment {
			t.Errorf("%s: %d %s; want 400 %s", name, resp.StatusCode, b, CodeInvalidAttachment)
		}
	}
}

// An archive is bounded by MaxArchiveBytes, an image still by
// MaxFileBytes, whichever is larger.
func TestUploadBoundsByKind(t *testing.T) {
	for _, cfg := range []Config{{MaxFileBytes: 4096, MaxArchiveBytes: 64 << 10}, {MaxFileBytes: 64 << 10, MaxArchiveBytes: 4096}} {
		h := newHarness(t, cfg, newFileFake(&fakeService{}))
		// Each is beyond the lesser bound, within the greater.
		archive := tarBytes(t, 10<<10)
		image := append(pngBytes(t), make([]byte, 10<<10)...)
		within, beyond := archive, image
		if cfg.MaxFileBytes > cfg.MaxArchiveBytes {
			within, beyond = image, archive
		}
		f := uploaded(t, h, string(within), "application/octet-stream")
		if f.Size != int64(len(within)) {
			t.Errorf("%+v: uploaded %+v", cfg, f)
		}
		for name, body := range map[string][]byte{
			"the lesser kind beyond its bound":    beyond,
			"the greater kind beyond its bound":   append(bytes.Clone(within), make([]byte, 60<<10)...),
			"a body beyond the greater bound too": append(bytes.Clone(within), make([]byte, 200<<10)...),
		} {
			resp, b := h.do(t, "POST", "/v1/files", string(body), "Content-Type", "application/octet-stream")
			if resp.StatusCode != http.StatusRequestEntityTooLarge || errDetail(t, b).Code != CodeFileTooLarge {
				t.Errorf("%+v: %s (%d bytes): %d %s; want 413 %s", cfg, name, len(body), resp.StatusCode, b, CodeFileTooLarge)
			}
		}
	}
}

// An attachment is an image: an archive, uploaded or inline, is refused
// with invalid_attachment, as the service resolves attachments.
func TestAttachmentNamingAnArchive(t *testing.T) {
	var fake *fileFake
	fake = newFileFake(&fakeService{submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		tenant := runs.ActorFrom(ctx).Tenant
		for i, a := range spec.Attachments {
			at := fmt.Sprintf("attachments[%d]", i)
			var err error
			if a.FileID != "" {
				_, err = fake.uploads.Attachment(ctx, tenant, at, a.FileID)
			} else {
				_, err = fake.uploads.Check(ctx, tenant, at, a.Name, a.MediaType, a.Data)
			}
			if err != nil {
				return runs.Run{}, err
			}
		}
		return sampleRun(runA, runs.Queued), nil
	}})
	h := newHarness(t, Config{}, fake)
	archive := uploaded(t, h, string(zipBytes(t)), "application/zip")
	image := uploaded(t, h, string(pngBytes(t)), "image/png")
	run := func(atts string) (*http.Response, []byte) {
		return h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"look","attachments":`+atts+`}`, "Content-Type", "application/json")
	}
	if resp, b := run(fmt.Sprintf(`[{"file_id":%q}]`, image.ID)); resp.StatusCode != http.StatusCreated {
		t.Fatalf("an uploaded image attached: %d %s", resp.StatusCode, b)
	}
	for name, atts := range map[string]string{
		"by id":  fmt.Sprintf(`[{"file_id":%q},{"file_id":%q}]`, image.ID, archive.ID),
		"inline": fmt.Sprintf(`[{"file_id":%q},{"data":%q}]`, image.ID, base64.StdEncoding.EncodeToString(zipBytes(t))),
	} {
		resp, b := run(atts)
		e := errDetail(t, b)
		if resp.StatusCode != http.StatusBadRequest || e.Code != CodeInvalidAttachment || e.Field != "attachments[1]" ||
			!strings.Contains(e.Message, "archive") || !strings.Contains(e.Message, "not an image") {
			t.Errorf("%s: an archive attached: %d %s; want 400 %s of attachments[1] saying it is not an image", name, resp.StatusCode, b, CodeInvalidAttachment)
		}
	}
}
