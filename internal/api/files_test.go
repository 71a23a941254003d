package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// fileFake is a service with files: they are checked and kept by
// files.Uploads, as the supervisor keeps them, in memory.
type fileFake struct {
	*fakeService
	store   *memFiles
	uploads *files.Uploads
	max     int // files per tenant
}

func newFileFake(svc *fakeService) *fileFake {
	st := &memFiles{files: map[string]files.File{}, data: map[string][]byte{}}
	return &fileFake{fakeService: svc, store: st, uploads: files.NewUploads(st, files.Limits{}, nil), max: 100}
}

func (f *fileFake) UploadFile(ctx context.Context, name, mediaType string, data []byte) (files.File, error) {
	tenant := runs.ActorFrom(ctx).Tenant
	if n, _ := f.store.CountFiles(ctx, tenant); n >= f.max {
		return files.File{}, &files.Refusal{Code: files.TooManyFiles, Field: "file", Reason: "too many"}
	}
	return f.uploads.Upload(ctx, tenant, name, mediaType, data)
}

func (f *fileFake) GetFile(ctx context.Context, id string) (files.File, error) {
	return f.uploads.Get(ctx, runs.ActorFrom(ctx).Tenant, id)
}

func (f *fileFake) FileContent(ctx context.Context, id string) (files.File, []byte, error) {
	return f.uploads.Content(ctx, runs.ActorFrom(ctx).Tenant, id)
}

func (f *fileFake) DeleteFile(ctx context.Context, id string) error {
	return f.uploads.Delete(ctx, runs.ActorFrom(ctx).Tenant, id)
}

// memFiles is a files.Store in memory, by tenant.
type memFiles struct {
	mu    sync.Mutex
	files map[string]files.File // by tenant/id
	data  map[string][]byte
}

func (m *memFiles) PutFile(_ context.Context, f files.File, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[f.Tenant+"/"+f.ID] = f
	m.data[f.Tenant+"/"+f.ID] = bytes.Clone(data)
	return nil
}

func (m *memFiles) GetFile(_ context.Context, tenant, id string) (files.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[tenant+"/"+id]
	if !ok {
		return files.File{}, fmt.Errorf("file %s: %w", id, runs.ErrNotFound)
	}
	return f, nil
}

func (m *memFiles) FileData(ctx context.Context, tenant, id string) ([]byte, error) {
	if _, err := m.GetFile(ctx, tenant, id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.data[tenant+"/"+id], nil
}

func (m *memFiles) DeleteFile(ctx context.Context, tenant, id string) error {
	if _, err := m.GetFile(ctx, tenant, id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, tenant+"/"+id)
	delete(m.data, tenant+"/"+id)
	return nil
}

func (m *memFiles) CountFiles(_ context.Context, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, f := range m.files {
		if f.Tenant == tenant {
			n++
		}
	}
	return n, nil
}

func pngBytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 3, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func multipartBody(t testing.TB, field, filename, contentType string, data []byte) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, filename))
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	w, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	mw.Close()
	return b.String(), mw.FormDataContentType()
}

func TestUploadFileRoutes(t *testing.T) {
	fake := newFileFake(&fakeService{})
	h := newHarness(t, Config{MaxFileBytes: 4096}, fake)
	img := pngBytes(t)

	body, ct := multipartBody(t, "file", "shot.png", "image/png", img)
	resp, b := h.do(t, "POST", "/v1/files", body, "Content-Type", ct)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("multipart upload: %d %s", resp.StatusCode, b)
	}
	var up fileResponse
	if err := json.Unmarshal(b, &up); err != nil {
		t.Fatal(err)
	}
	if !files.ValidID(up.ID) || up.MediaType != "image/png" || up.Size != int64(len(img)) || up.Name != "shot.png" ||
		up.Width != 3 || resp.Header.Get("Location") != "/v1/files/"+up.ID || up.ExpiresAt.IsZero() {
		t.Fatalf("uploaded %s (Location %s)", b, resp.Header.Get("Location"))
	}
	resp, b = h.do(t, "POST", "/v1/files?name=raw.png", string(img), "Content-Type", "image/png")
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"name":"raw.png"`) {
		t.Fatalf("raw upload: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "POST", "/v1/files", string(img), "Content-Type", "application/octet-stream",
		"Content-Disposition", `attachment; filename="d.png"`)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(string(b), `"name":"d.png"`) {
		t.Fatalf("raw octet-stream upload: %d %s", resp.StatusCode, b)
	}

	resp, b = h.do(t, "GET", "/v1/files/"+up.ID, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), up.ID) {
		t.Fatalf("get: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "GET", "/v1/files/"+up.ID+"/content", "")
	if resp.StatusCode != http.StatusOK || !bytes.Equal(b, img) || resp.Header.Get("Content-Type") != "image/png" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("content: %d %q %v", resp.StatusCode, b, resp.Header)
	}
	resp, _ = h.do(t, "DELETE", "/v1/files/"+up.ID, "")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	resp, b = h.do(t, "GET", "/v1/files/"+up.ID, "")
	if resp.StatusCode != http.StatusNotFound || errDetail(t, b).Code != CodeNotFound {
		t.Fatalf("get after delete: %d %s", resp.StatusCode, b)
	}

	jpeg := append([]byte{0xff, 0xd8, 0xff, 0xe0}, img...)
	garbage := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("x"), 100)...)
	badPart, badCT := multipartBody(t, "image", "x.png", "image/png", img)
	for name, c := range map[string]struct {
		body, ct string
		status   int
		code     string
	}{
		"wrong type":           {"hello", "text/plain", 400, CodeInvalidAttachment},
		"no type":              {string(img), "", 400, CodeInvalidAttachment},
		"png header, garbage":  {string(garbage), "image/png", 400, CodeInvalidAttachment},
		"jpeg declared png":    {string(jpeg), "image/png", 400, CodeInvalidAttachment},
		"svg":                  {"<svg/>", "image/svg+xml", 400, CodeInvalidAttachment},
		"too large":            {string(append(img, make([]byte, 5000)...)), "image/png", 413, CodeFileTooLarge},
		"much too large":       {string(make([]byte, 100<<10)), "image/png", 413, CodeFileTooLarge},
		"other form field":     {badPart, badCT, 400, CodeUnknownField},
		"multipart, no bound.": {"x", "multipart/form-data", 400, CodeInvalidAttachment},
	} {
		resp, b := h.do(t, "POST", "/v1/files", c.body, "Content-Type", c.ct)
		if resp.StatusCode != c.status || errDetail(t, b).Code != c.code {
			t.Errorf("%s: %d %s; want %d %s", name, resp.StatusCode, b, c.status, c.code)
		}
	}
	for _, path := range []string{"/v1/files/nope", "/v1/files/" + uuid.NewString(), "/v1/files/file-" + uuid.NewString() + "/content"} {
		if resp, b := h.do(t, "GET", path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
		}
	}
	fake.max = 0
	resp, b = h.do(t, "POST", "/v1/files", string(img), "Content-Type", "image/png")
	if resp.StatusCode != http.StatusTooManyRequests || errDetail(t, b).Code != CodeTooManyFiles {
		t.Errorf("over the tenant's files: %d %s", resp.StatusCode, b)
	}
}

func TestRunRequestAttachments(t *testing.T) {
	img := pngBytes(t)
	b64 := base64.StdEncoding.EncodeToString(img)
	var got runs.Spec
	fake := newFileFake(&fakeService{submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		got = spec
		return sampleRun(runA, runs.Queued), nil
	}})
	h := newHarness(t, Config{MaxInlineAttachmentBytes: 1 << 10}, fake)
	id := "file-" + uuid.NewString()
	resp, b := h.do(t, "POST", "/v1/runs", fmt.Sprintf(`{"agent":"claude","prompt":"look","attachments":[{"file_id":%q},{"media_type":"image/png","data":%q,"name":"a.png"}]}`, id, b64),
		"Content-Type", "application/json")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("run with attachments: %d %s", resp.StatusCode, b)
	}
	if len(got.Attachments) != 2 || got.Attachments[0].FileID != id || !bytes.Equal(got.Attachments[1].Data, img) ||
		got.Attachments[1].Name != "a.png" || got.Attachments[1].Size != int64(len(img)) || got.Attachments[1].SHA256 == "" {
		t.Fatalf("submitted %+v", got.Attachments)
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 2<<10))
	many := strings.TrimSuffix(strings.Repeat(fmt.Sprintf(`{"file_id":%q},`, id), files.MaxAttachments+1), ",")
	for name, c := range map[string]struct {
		atts   string
		status int
		code   string
	}{
		"not an array":      {`{"file_id":"x"}`, 400, CodeInvalidField},
		"bad file id":       {`[{"file_id":"../x"}]`, 400, CodeAttachmentFileNotFound},
		"both":              {fmt.Sprintf(`[{"file_id":%q,"data":%q}]`, id, b64), 400, CodeInvalidField},
		"neither":           {`[{"name":"x"}]`, 400, CodeInvalidField},
		"unknown member":    {`[{"dat":"AAAA"}]`, 400, CodeUnknownField},
		"not base64":        {`[{"data":"!!!"}]`, 400, CodeInvalidAttachment},
		"empty data":        {`[{"data":""}]`, 400, CodeInvalidAttachment},
		"too many":          {"[" + many + "]", 400, CodeInvalidField},
		"inline too large":  {fmt.Sprintf(`[{"data":%q}]`, big), 413, CodeFileTooLarge},
		"media type and id": {fmt.Sprintf(`[{"file_id":%q,"media_type":"image/png"}]`, id), 400, CodeInvalidField},
	} {
		resp, b := h.do(t, "POST", "/v1/runs", `{"agent":"claude","prompt":"look","attachments":`+c.atts+`}`, "Content-Type", "application/json")
		if resp.StatusCode != c.status || errDetail(t, b).Code != c.code {
			t.Errorf("%s: %d %s; want %d %s", name, resp.StatusCode, b, c.status, c.code)
		}
	}
	// The service's verdicts on the files come back with their codes.
	fake.submit = func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		return runs.Run{}, &files.Refusal{Code: files.NotFound, Field: "attachments[0]", Reason: "no file"}
	}
	resp, b = h.do(t, "POST", "/v1/runs", fmt.Sprintf(`{"agent":"claude","prompt":"look","attachments":[{"file_id":%q}]}`, id), "Content-Type", "application/json")
	if e := errDetail(t, b); resp.StatusCode != 400 || e.Code != CodeAttachmentFileNotFound || e.Field != "attachments[0]" {
		t.Errorf("missing file: %d %s", resp.StatusCode, b)
	}
}

func TestMessageAttachmentsDecoded(t *testing.T) {
	img := pngBytes(t)
	var got runs.Input
	fake := newFileFake(&fakeService{input: func(ctx context.Context, id string, in runs.Input) (runs.InputResult, error) {
		got = in
		return runs.InputResult{MessageID: "m1"}, nil
	}})
	h := newHarness(t, Config{}, fake)
	resp, b := h.do(t, "POST", "/v1/runs/"+runA+"/messages",
		fmt.Sprintf(`{"text":"see","attachments":[{"data":%q}]}`, base64.StdEncoding.EncodeToString(img)), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusAccepted || len(got.Attachments) != 1 || !bytes.Equal(got.Attachments[0].Data, img) {
		t.Fatalf("message with an image: %d %s; input %+v", resp.StatusCode, b, got)
	}
}

func FuzzDecodeAttachments(f *testing.F) {
	f.Add(`[{"file_id":"file-0196a7c8-5a3e-7b1e-9d0a-2f4c6b8e1a3d"}]`)
	f.Add(`[{"media_type":"image/png","data":"iVBORw0KGgo=","name":"a.png"}]`)
	f.Add(`[{"data":"AA"},{"data":"AAA="}]`)
	f.Add(`[{"file_id":1}]`)
	f.Add(`[[]]`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, raw string) {
		if !json.Valid([]byte(raw)) || strings.TrimSpace(raw) == "" || strings.TrimSpace(raw) == "null" {
			return
		}
		atts, err := decodeAttachments("attachments", json.RawMessage(strings.TrimSpace(raw)))
		if err != nil {
			return
		}
		if len(atts) > files.MaxAttachments {
			t.Fatalf("%d attachments accepted", len(atts))
		}
		for _, a := range atts {
			if (a.FileID == "") == (a.Data == nil) || a.FileID != "" && !files.ValidID(a.FileID) {
				t.Fatalf("accepted %+v", a)
			}
		}
	})
}

func FuzzParseUpload(f *testing.F) {
	img := pngBytes(f)
	body, ct := multipartBody(f, "file", "a.png", "image/png", img)
	f.Add(ct, "", body)
	f.Add("image/png", `attachment; filename="x.png"`, string(img))
	f.Add("multipart/form-data; boundary=x", "", "--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--x--\r\n")
	f.Add("application/octet-stream", "", "")
	f.Add("application/x-gzip", `attachment; filename="repo.tgz"`, string(gzipBytes(f, tarBytes(f, 10))))
	f.Fuzz(func(t *testing.T, ct, disposition, body string) {
		up, err := parseUpload(ct, disposition, "", []byte(body))
		if err == nil && len(up.data) > len(body) {
			t.Fatalf("an upload of %d bytes from a body of %d", len(up.data), len(body))
		}
	})
}

// errDetail decodes an error body. (errorBody also holds it to
// openapi.yaml, which documents the file codes apart.)
func errDetail(t *testing.T, b []byte) ErrorDetail {
	t.Helper()
	var e ErrorResponse
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error body %q: %v", b, err)
	}
	return e.Error
}

// Inline attachments may make a body larger than MAX_BODY_BYTES; the rest
// of it may not.
func TestInlineAttachmentsGrowTheBodyLimit(t *testing.T) {
	fake := newFileFake(&fakeService{submit: func(ctx context.Context, spec runs.Spec) (runs.Run, error) {
		return sampleRun(runA, runs.Queued), nil
	}})
	h := newHarness(t, Config{MaxBodyBytes: 1024, MaxInlineAttachmentBytes: 4096}, fake)
	data := base64.StdEncoding.EncodeToString(make([]byte, 3000))
	resp, b := h.do(t, "POST", "/v1/runs", fmt.Sprintf(`{"agent":"claude","prompt":"look","attachments":[{"data":%q}]}`, data), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a 4 KB body that is mostly an inline image: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "POST", "/v1/runs", fmt.Sprintf(`{"agent":"claude","prompt":%q}`, strings.Repeat("x", 2000)), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errDetail(t, b).Code != CodeBodyTooLarge {
		t.Errorf("a 2 KB prompt: %d %s", resp.StatusCode, b)
	}
	resp, b = h.do(t, "POST", "/v1/runs", fmt.Sprintf(`{"agent":"claude","prompt":%q,"attachments":[{"data":"AAAA"}]}`, strings.Repeat("x", 2000)), "Content-Type", "application/json")
	if resp.StatusCode != http.StatusRequestEntityTooLarge || errDetail(t, b).Code != CodeBodyTooLarge {
		t.Errorf("a 2 KB prompt with a small image: %d %s", resp.StatusCode, b)
	}
}

// A file is its tenant's: another tenant's key finds none; a read key may
// look, not upload or delete.
func TestFilesByTenantAndRole(t *testing.T) {
	ts := newTenants(t)
	fake := newFileFake(&fakeService{})
	h := newHarness(t, ts.config(), fake)
	bearer := func(tenant string, role auth.Role) []string {
		return []string{"Authorization", "Bearer " + ts.secrets[keyID(tenant, role)]}
	}
	img := string(pngBytes(t))
	resp, b := h.do(t, "POST", "/v1/files", img, append(bearer(tenantAcme, auth.RoleWrite), "Content-Type", "image/png")...)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var f fileResponse
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if resp, b := h.do(t, "POST", "/v1/files", img, append(bearer(tenantAcme, auth.RoleRead), "Content-Type", "image/png")...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("upload with a read key: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "GET", "/v1/files/"+f.ID, "", bearer(tenantAcme, auth.RoleRead)...); resp.StatusCode != http.StatusOK {
		t.Errorf("get with the tenant's read key: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "DELETE", "/v1/files/"+f.ID, "", bearer(tenantAcme, auth.RoleRead)...); resp.StatusCode != http.StatusForbidden {
		t.Errorf("delete with a read key: %d %s", resp.StatusCode, b)
	}
	for _, path := range []string{"/v1/files/" + f.ID, "/v1/files/" + f.ID + "/content"} {
		if resp, b := h.do(t, "GET", path, "", bearer(tenantGlobex, auth.RoleAdmin)...); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s by another tenant: %d %s", path, resp.StatusCode, b)
		}
	}
	if resp, b := h.do(t, "DELETE", "/v1/files/"+f.ID, "", bearer(tenantGlobex, auth.RoleAdmin)...); resp.StatusCode != http.StatusNotFound {
		t.Errorf("delete by another tenant: %d %s", resp.StatusCode, b)
	}
	if resp, b := h.do(t, "GET", "/v1/files/"+f.ID, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("get without a key: %d %s", resp.StatusCode, b)
	}
}
