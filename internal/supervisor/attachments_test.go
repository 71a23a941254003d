package supervisor

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
	"github.com/google/uuid"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
)

// memFile is a file of the memStore.
type memFile struct {
	f    files.File
	data []byte
}

func memFileKey(tenant, id string) string { return tenant + "/" + id }

func (m *memStore) PutFile(_ context.Context, f files.File, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]memFile{}
	}
	m.files[memFileKey(f.Tenant, f.ID)] = memFile{f: f, data: append([]byte(nil), data...)}
	return nil
}

func (m *memStore) file(tenant, id string) (memFile, error) {
	mf, ok := m.files[memFileKey(tenant, id)]
	if !ok || !time.Now().Before(mf.f.ExpiresAt) {
		return memFile{}, fmt.Errorf("file %s: %w", id, runs.ErrNotFound)
	}
	return mf, nil
}

func (m *memStore) GetFile(_ context.Context, tenant, id string) (files.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mf, err := m.file(tenant, id)
	return mf.f, err
}

func (m *memStore) FileData(_ context.Context, tenant, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mf, err := m.file(tenant, id)
	return mf.data, err
}

func (m *memStore) DeleteFile(_ context.Context, tenant, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.file(tenant, id); err != nil {
		return err
	}
	delete(m.files, memFileKey(tenant, id))
	return nil
}

func (m *memStore) CountFiles(_ context.Context, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, mf := range m.files {
		if mf.f.Tenant == tenant && time.Now().Before(mf.f.ExpiresAt) {
			n++
		}
	}
	return n, nil
}

// A 2x2 PNG, as image/png writes it.
func testPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 2, 2))
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// imgAdapter is the fake agent with attachments: its Command records the
// images it was given, as written under the run's directory.
type imgAdapter struct {
	fakeAdapter
	mu   *sync.Mutex
	seen *[]runs.Image
}

func (a imgAdapter) Name() string { return "img" }
func (a imgAdapter) Describe() runs.Description {
	d := fakeAdapter{}.Describe()
	d.Name = "img"
	d.Fields = append(d.Fields, runs.FieldAttachments, runs.FieldInteractive)
	d.Interaction.MessageAttachments = true
	return d
}
func (a imgAdapter) Command(inv runs.Invocation) (runs.Command, error) {
	if inv.Spec.Interactive {
		return runs.Command{Env: []string{fakeAgentEnv + "=talk"}}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, im := range inv.Images {
		onDisk, err := os.ReadFile(im.Path)
		if err != nil || !bytes.Equal(onDisk, im.Data) {
			return runs.Command{}, fmt.Errorf("image %s not written whole: %v", im.Path, err)
		}
		*a.seen = append(*a.seen, im)
	}
	return a.fakeAdapter.Command(inv)
}
func (a imgAdapter) NewDecoder(inv runs.Invocation) runs.Decoder {
	if inv.Spec.Interactive {
		return &imgDecoder{sessDecoder: &sessDecoder{prompt: inv.Spec.Prompt, pending: map[string]bool{}}, a: a}
	}
	return a.fakeAdapter.NewDecoder(inv)
}

// imgDecoder is the session decoder that records the images each message
// was sent with.
type imgDecoder struct {
	*sessDecoder
	a imgAdapter
}

func (d *imgDecoder) Send(text string, images []runs.Image, steer bool) error {
	d.a.mu.Lock()
	for _, im := range images {
		if onDisk, err := os.ReadFile(im.Path); err == nil && bytes.Equal(onDisk, im.Data) {
			*d.a.seen = append(*d.a.seen, im)
		}
	}
	d.a.mu.Unlock()
	d.write("send:" + text)
	return nil
}

type fileHarness struct {
	*harness
	tmp   string
	now   *atomic.Int64 // nanoseconds added to the clock
	mu    sync.Mutex
	seen  []runs.Image
	files files.Limits
}

func newFileHarness(t *testing.T, lim files.Limits, opts ...func(*Config)) *fileHarness {
	t.Helper()
	fh := &fileHarness{tmp: t.TempDir(), now: new(atomic.Int64)}
	store := newMemStore()
	cfg := Config{
		WorkspaceRoot: t.TempDir(), Path: os.Getenv("PATH"), Reaper: os.Args[0], KillGrace: 300 * time.Millisecond,
		StoreRetry: 500 * time.Millisecond, TempRoot: fh.tmp,
		Now: func() time.Time { return time.Now().Add(time.Duration(fh.now.Load())) },
	}
	cfg.Uploads = files.NewUploads(store, lim, cfg.Now)
	for _, o := range opts {
		o(&cfg)
	}
	agents := []*Agent{
		{Adapter: fakeAdapter{mode: "hello"}, Bin: os.Args[0], Home: t.TempDir()},
		{Adapter: imgAdapter{fakeAdapter: fakeAdapter{mode: "hello"}, mu: &fh.mu, seen: &fh.seen}, Bin: os.Args[0], Home: t.TempDir()},
	}
	sup := New(cfg, store, agents, nopObserver{}, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)))
	startSupervisor(t, sup)
	fh.harness = &harness{sup: sup, store: store, root: cfg.WorkspaceRoot}
	return fh
}

func tenantCtx(tenant string) context.Context {
	return runs.WithActor(context.Background(), runs.Actor{KeyID: "k-" + tenant, Tenant: tenant})
}

func fileErrCode(err error) string {
	var fe *files.Refusal
	if errors.As(err, &fe) {
		return fe.Code
	}
	return ""
}

func TestUploadFile(t *testing.T) {
	fh := newFileHarness(t, files.Limits{MaxBytes: 4096, MaxPerTenant: 2, TTL: time.Hour})
	acme := tenantCtx("acme")
	data := testPNG(t)
	f, err := fh.sup.UploadFile(acme, "shot.png", "image/png", data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if !files.ValidID(f.ID) || f.Tenant != "acme" || f.MediaType != "image/png" || f.Size != int64(len(data)) ||
		f.SHA256 != hex.EncodeToString(sum[:]) || f.Name != "shot.png" || f.Width != 2 ||
		f.ExpiresAt.Sub(f.CreatedAt) != time.Hour {
		t.Fatalf("uploaded %+v", f)
	}
	if got, err := fh.sup.GetFile(acme, f.ID); err != nil || got != f {
		t.Fatalf("GetFile = %+v, %v", got, err)
	}
	if _, back, err := fh.sup.FileContent(acme, f.ID); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("FileContent = %d bytes, %v", len(back), err)
	}
	// Another tenant's file is no file at all.
	globex := tenantCtx("globex")
	if _, err := fh.sup.GetFile(globex, f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile of another tenant = %v, want ErrNotFound", err)
	}
	if err := fh.sup.DeleteFile(globex, f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("DeleteFile of another tenant = %v, want ErrNotFound", err)
	}
	for name, c := range map[string]struct {
		name, mt string
		data     []byte
		code     string
	}{
		"jpeg declared png": {"", "image/png", append([]byte{0xff, 0xd8, 0xff}, data...), files.InvalidAttachment},
		"text":              {"", "", []byte("hello"), files.InvalidAttachment},
		"too large":         {"", "", append(data, make([]byte, 4096)...), files.TooLarge},
		"bad name":          {"a/b.png", "", data, files.InvalidAttachment},
	} {
		if _, err := fh.sup.UploadFile(acme, c.name, c.mt, c.data); fileErrCode(err) != c.code {
			t.Errorf("%s: UploadFile = %v, want code %s", name, err, c.code)
		}
	}
	if _, err := fh.sup.UploadFile(acme, "", "", data); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.sup.UploadFile(acme, "", "", data); fileErrCode(err) != files.TooManyFiles {
		t.Errorf("third file of a tenant with room for two = %v, want %s", err, files.TooManyFiles)
	}
	if _, err := fh.sup.UploadFile(globex, "", "", data); err != nil {
		t.Errorf("another tenant's first file = %v", err)
	}
	if err := fh.sup.DeleteFile(acme, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.sup.GetFile(acme, f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile after delete = %v, want ErrNotFound", err)
	}
	// Expired files are gone, on the supervisor's clock.
	g, err := fh.sup.UploadFile(acme, "", "", data)
	if err != nil {
		t.Fatal(err)
	}
	fh.now.Store(int64(time.Hour + time.Second))
	if _, err := fh.sup.GetFile(acme, g.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile after the TTL = %v, want ErrNotFound", err)
	}
	if _, err := fh.sup.GetFile(acme, "../../etc/passwd"); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("GetFile of a path = %v, want ErrNotFound", err)
	}
}

// A run's images: an inline one is stored as a file of the tenant, one
// named by id must be the tenant's, and the adapter gets both written
// under the run's temporary directory, which goes with the run.
func TestRunAttachments(t *testing.T) {
	fh := newFileHarness(t, files.Limits{})
	acme := tenantCtx("acme")
	data := testPNG(t)
	up, err := fh.sup.UploadFile(acme, "up.png", "", data)
	if err != nil {
		t.Fatal(err)
	}
	inline := append([]byte(nil), data...)
	spec := runs.Spec{Agent: "img", Prompt: "look", Attachments: []runs.Attachment{
		{FileID: up.ID}, {MediaType: "image/png", Name: "inline.png", Data: inline},
	}}
	if _, err := fh.sup.Submit(acme, runs.Spec{Agent: "fake", Prompt: "look", Attachments: spec.Attachments}); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("attachments to an agent without them = %v, want ErrUnsupported", err)
	}
	if _, err := fh.sup.Submit(tenantCtx("globex"), spec); fileErrCode(err) != files.NotFound {
		t.Errorf("another tenant's file = %v, want %s", err, files.NotFound)
	}
	bad := spec
	bad.Attachments = []runs.Attachment{{MediaType: "image/gif", Data: inline}}
	if _, err := fh.sup.Submit(acme, bad); fileErrCode(err) != files.InvalidAttachment {
		t.Errorf("a PNG declared GIF = %v, want %s", err, files.InvalidAttachment)
	}
	r, err := fh.sup.Submit(acme, spec)
	if err != nil {
		t.Fatal(err)
	}
	if a := r.Spec.Attachments; len(a) != 2 || a[0].FileID != up.ID || !files.ValidID(a[1].FileID) || a[1].Data != nil ||
		a[1].Name != "inline.png" || a[0].Size != int64(len(data)) {
		t.Fatalf("the run keeps attachments %+v", a)
	}
	done := fh.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Succeeded {
		t.Fatalf("run %s: %+v", done.Status, done.Error)
	}
	fh.mu.Lock()
	seen := append([]runs.Image(nil), fh.seen...)
	fh.mu.Unlock()
	if len(seen) != 2 || seen[0].MediaType != "image/png" || !bytes.Equal(seen[1].Data, data) ||
		!strings.HasPrefix(seen[0].Path, fh.tmp) || filepath.Base(filepath.Dir(seen[0].Path)) != attachmentsDir {
		t.Fatalf("the adapter saw %+v", seen)
	}
	// The run's temporary directory goes as its worker lets go of it,
	// just after run.completed is stored.
	waitUntil(t, "the run's image to go with its temporary directory", func() bool {
		_, err := os.Stat(seen[0].Path)
		return os.IsNotExist(err)
	})
	var started runs.RunStartedData
	for _, e := range fh.store.eventsOf(r.ID) {
		if e.Type == runs.EventRunStarted {
			if strings.Contains(string(e.JSON), base64.StdEncoding.EncodeToString(data)[:16]) {
				t.Errorf("run.started carries the image's bytes: %s", e.JSON)
			}
			var env struct{ Data runs.RunStartedData }
			if err := json.Unmarshal(e.JSON, &env); err != nil {
				t.Fatal(err)
			}
			started = env.Data
		}
	}
	if len(started.Attachments) != 2 || started.Attachments[1].FileID != r.Spec.Attachments[1].FileID {
		t.Errorf("run.started names attachments %+v", started.Attachments)
	}
	// The inline image is a file of the tenant now.
	if _, err := fh.sup.GetFile(acme, r.Spec.Attachments[1].FileID); err != nil {
		t.Errorf("the inline image as a file: %v", err)
	}
}

// A message's images reach the session's Send, written in the run's
// directory, and its events name them.
func TestMessageAttachments(t *testing.T) {
	fh := newFileHarness(t, files.Limits{})
	acme := tenantCtx("acme")
	data := testPNG(t)
	r, err := fh.sup.Submit(acme, runs.Spec{Agent: "img", Prompt: "hi", Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	fh.waitRecord(t, r.ID, "idle", func(r runs.Run) bool { return r.Activity == runs.Idle })
	if _, err := fh.sup.Input(acme, r.ID, runs.Input{Kind: runs.InputMessage, Text: "see", Attachments: []runs.Attachment{{FileID: "file-" + uuid.NewString()}}}); fileErrCode(err) != files.NotFound {
		t.Errorf("a message with a missing file = %v, want %s", err, files.NotFound)
	}
	res, err := fh.sup.Input(acme, r.ID, runs.Input{Kind: runs.InputMessage, Text: "see", Attachments: []runs.Attachment{{MediaType: "image/png", Data: data}}})
	if err != nil {
		t.Fatal(err)
	}
	fh.waitFor(t, r.ID, runs.EventTurnStarted, res.MessageID)
	fh.waitFor(t, r.ID, runs.EventMessageCompleted, "answer to see")
	fh.mu.Lock()
	seen := append([]runs.Image(nil), fh.seen...)
	fh.mu.Unlock()
	if len(seen) != 1 || !bytes.Equal(seen[0].Data, data) || !strings.HasPrefix(seen[0].Path, fh.tmp) {
		t.Fatalf("Send saw %+v", seen)
	}
	for _, e := range fh.store.eventsOf(r.ID) {
		if (e.Type == runs.EventTurnStarted || e.Type == runs.EventMessageQueued) && strings.Contains(string(e.JSON), res.MessageID) &&
			!strings.Contains(string(e.JSON), `"media_type":"image/png"`) {
			t.Errorf("%s does not name the attachment: %s", e.Type, e.JSON)
		}
	}
	if _, err := fh.sup.Input(acme, r.ID, runs.Input{Kind: runs.InputClose}); err != nil {
		t.Fatal(err)
	}
	fh.wait(t, r.ID, 20*time.Second)
}

// A file refused on the run's replica is the same refusal on the replica
// that took the message.
func TestFileErrorCrossesReplicas(t *testing.T) {
	in := &files.Refusal{Code: files.NotFound, Field: "attachments[0]", Reason: "gone"}
	_, err := decodeInputReply(encodeInputReply(runs.InputResult{}, fmt.Errorf("wrapped: %w", in)))
	var got *files.Refusal
	if !errors.As(err, &got) || *got != *in {
		t.Fatalf("decoded %v (%T), want %+v", err, err, in)
	}
}

// A request refused for its attachments leaves its idempotency key free,
// and a replay by key stores no second copy of its inline image.
func TestAttachmentsAndIdempotencyKeys(t *testing.T) {
	fh := newFileHarness(t, files.Limits{})
	acme := tenantCtx("acme")
	data := testPNG(t)
	bad := runs.Spec{Agent: "img", Prompt: "look", IdempotencyKey: "k1", Attachments: []runs.Attachment{{MediaType: "image/png", Data: []byte("not a png")}}}
	if _, err := fh.sup.Submit(acme, bad); fileErrCode(err) != files.InvalidAttachment {
		t.Fatalf("a bad image = %v, want %s", err, files.InvalidAttachment)
	}
	good := runs.Spec{Agent: "img", Prompt: "look", IdempotencyKey: "k1", Attachments: []runs.Attachment{{MediaType: "image/png", Data: data, SHA256: "s1"}}}
	r1, err := fh.sup.Submit(acme, good)
	if err != nil {
		t.Fatalf("the same key, the image fixed: %v", err)
	}
	r2, err := fh.sup.Submit(acme, good)
	if err != nil || r2.ID != r1.ID {
		t.Fatalf("replay = %s, %v; want run %s", r2.ID, err, r1.ID)
	}
	if n, err := fh.store.CountFiles(context.Background(), "acme"); err != nil || n != 1 {
		t.Errorf("the tenant has %d files after a replay, %v; want 1", n, err)
	}
	fh.wait(t, r1.ID, 20*time.Second)
}

// testZip is a zip of one file.
func testZip(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.Create("README.md")
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("# hi\n"))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// An archive is uploaded for a workspace; it is not an image to attach,
// by id or inline, and an inline one is not stored.
func TestArchiveIsNoAttachment(t *testing.T) {
	fh := newFileHarness(t, files.Limits{})
	acme := tenantCtx("acme")
	archive, err := fh.sup.UploadFile(acme, "repo.zip", "", testZip(t))
	if err != nil || archive.Kind != files.KindArchive || archive.MediaType != files.Zip {
		t.Fatalf("UploadFile of a zip = %+v, %v", archive, err)
	}
	for name, atts := range map[string][]runs.Attachment{
		"by id":  {{FileID: archive.ID}},
		"inline": {{Data: testZip(t)}},
	} {
		_, err := fh.sup.Submit(acme, runs.Spec{Agent: "img", Prompt: "look", Attachments: atts})
		if fileErrCode(err) != files.InvalidAttachment || !strings.Contains(err.Error(), "not an image") {
			t.Errorf("%s: a run attaching an archive = %v, want %s saying it is not an image", name, err, files.InvalidAttachment)
		}
	}
	if n, err := fh.store.CountFiles(context.Background(), "acme"); err != nil || n != 1 {
		t.Errorf("the tenant has %d files, %v; want only the uploaded archive", n, err)
	}
}

// A file deleted while its run waits in the queue fails the run when it
// starts, saying so, and leaves no directory behind.
func TestAttachmentGoneBeforeTheRunStarts(t *testing.T) {
	fh := newFileHarness(t, files.Limits{}, func(c *Config) { c.MaxConcurrent = 1 })
	acme := tenantCtx("acme")
	f, err := fh.sup.UploadFile(acme, "", "", testPNG(t))
	if err != nil {
		t.Fatal(err)
	}
	busy, err := fh.sup.Submit(acme, runs.Spec{Agent: "img", Prompt: "mode:sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	fh.waitRecord(t, busy.ID, "running", func(r runs.Run) bool { return r.Status == runs.Running })
	r, err := fh.sup.Submit(acme, runs.Spec{Agent: "img", Prompt: "look", Attachments: []runs.Attachment{{FileID: f.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.sup.DeleteFile(acme, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.sup.Cancel(acme, busy.ID); err != nil {
		t.Fatal(err)
	}
	done := fh.wait(t, r.ID, 20*time.Second)
	if done.Status != runs.Failed || done.Error == nil || !strings.Contains(done.Error.Message, "no longer available") {
		t.Fatalf("run %s, error %+v", done.Status, done.Error)
	}
	left, _ := filepath.Glob(filepath.Join(fh.tmp, "agentgate-run-"+r.ID+"-*"))
	if len(left) != 0 {
		t.Errorf("the run's temporary directory is left: %v", left)
	}
}

// A supervisor without uploads keeps no files: a run's attachments are
// refused as unsupported, and the file routes find nothing.
func TestNoUploads(t *testing.T) {
	fh := newFileHarness(t, files.Limits{}, func(c *Config) { c.Uploads = nil })
	acme := tenantCtx("acme")
	spec := runs.Spec{Agent: "img", Prompt: "look", Attachments: []runs.Attachment{{MediaType: "image/png", Data: testPNG(t)}}}
	if _, err := fh.sup.Submit(acme, spec); !errors.Is(err, runs.ErrUnsupported) {
		t.Errorf("attachments without uploads = %v, want ErrUnsupported", err)
	}
	if _, err := fh.sup.UploadFile(acme, "", "", testPNG(t)); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("UploadFile without uploads = %v, want ErrNotFound", err)
	}
	if _, _, err := fh.sup.FileContent(acme, "file-"+uuid.NewString()); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("FileContent without uploads = %v, want ErrNotFound", err)
	}
}
