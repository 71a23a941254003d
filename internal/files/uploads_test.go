package files

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentgate/agentgate/internal/runs"
)

// memStore keeps files in memory, as the store does: per tenant, and gone
// after their expiry on the wall clock.
type memStore struct {
	mu    sync.Mutex
	files map[string]memFile
	// failCount, when set, is CountFiles's error.
	failCount error
}

type memFile struct {
	f    File
	data []byte
}

func newMemStore() *memStore { return &memStore{files: map[string]memFile{}} }

func memKey(tenant, id string) string { return tenant + "/" + id }

func (m *memStore) PutFile(_ context.Context, f File, data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[memKey(f.Tenant, f.ID)] = memFile{f: f, data: bytes.Clone(data)}
	return nil
}

func (m *memStore) file(tenant, id string) (memFile, error) {
	mf, ok := m.files[memKey(tenant, id)]
	if !ok {
		return memFile{}, fmt.Errorf("file %s: %w", id, runs.ErrNotFound)
	}
	return mf, nil
}

func (m *memStore) GetFile(_ context.Context, tenant, id string) (File, error) {
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
	delete(m.files, memKey(tenant, id))
	return nil
}

func (m *memStore) CountFiles(_ context.Context, tenant string) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failCount != nil {
		return 0, m.failCount
	}
	n := 0
	for _, mf := range m.files {
		if mf.f.Tenant == tenant {
			n++
		}
	}
	return n, nil
}

// clock is a settable clock for Uploads.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func refusalCode(err error) string {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// A file is its tenant's record of checked bytes, read back whole, until
// it is deleted or expires on the uploads' clock.
func TestUploadsKeepATenantsFiles(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)}
	up := NewUploads(newMemStore(), Limits{TTL: time.Hour}, clk.Now)
	data := encoded(t, PNG, 2, 3)
	f, err := up.Create(ctx, "acme", "file", "shot.png", "", data)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := File{ID: f.ID, Tenant: "acme", Kind: KindImage, MediaType: PNG, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]),
		Name: "shot.png", Width: 2, Height: 3, CreatedAt: clk.now.Truncate(time.Millisecond),
		ExpiresAt: clk.now.Truncate(time.Millisecond).Add(time.Hour)}
	if !ValidID(f.ID) || f != want {
		t.Fatalf("created %+v, want %+v", f, want)
	}
	if got, back, err := up.Content(ctx, "acme", f.ID); err != nil || got != f || !bytes.Equal(back, data) {
		t.Fatalf("Content = %+v, %d bytes, %v", got, len(back), err)
	}
	if _, err := up.Get(ctx, "globex", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("another tenant's Get = %v, want ErrNotFound", err)
	}
	if err := up.Delete(ctx, "globex", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("another tenant's Delete = %v, want ErrNotFound", err)
	}
	if n, err := up.Count(ctx, "acme"); err != nil || n != 1 {
		t.Errorf("Count = %d, %v; want 1", n, err)
	}
	clk.Advance(time.Hour)
	if _, err := up.Get(ctx, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Get at the expiry = %v, want ErrNotFound", err)
	}
	if err := up.Delete(ctx, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Delete of an expired file = %v, want ErrNotFound", err)
	}
}

func TestUploadsDeleteDefaultsAndNonIDs(t *testing.T) {
	ctx := context.Background()
	up := NewUploads(newMemStore(), Limits{}, nil)
	f, err := up.Create(ctx, "acme", "file", "", "", encoded(t, GIF, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ExpiresAt.Sub(f.CreatedAt); got != DefaultTTL {
		t.Errorf("a zero TTL keeps a file %v, want %v", got, DefaultTTL)
	}
	if err := up.Delete(ctx, "acme", f.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := up.Content(ctx, "acme", f.ID); !errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Content after Delete = %v, want ErrNotFound", err)
	}
	for _, id := range []string{"../../etc/passwd", "file-" + strings.Repeat("0", 36), "run-1", ""} {
		if _, err := up.Get(ctx, "acme", id); !errors.Is(err, runs.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
	}
}

// What is refused says why, with its code and the request's field, and
// stores nothing.
func TestUploadsRefuse(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	up := NewUploads(st, Limits{MaxBytes: 4096, MaxPerTenant: 1}, nil)
	data := encoded(t, PNG, 2, 2)
	for name, c := range map[string]struct {
		name, mediaType string
		data            []byte
		code            string
	}{
		"jpeg declared png": {"", PNG, encoded(t, JPEG, 2, 2), InvalidAttachment},
		"text":              {"", "", []byte("hello"), InvalidAttachment},
		"too large":         {"", "", append(bytes.Clone(data), make([]byte, 4096)...), TooLarge},
		"slash in name":     {"a/b.png", "", data, InvalidAttachment},
		"control in name":   {"a\nb.png", "", data, InvalidAttachment},
		"long name":         {strings.Repeat("a", MaxNameBytes+1), "", data, InvalidAttachment},
	} {
		_, err := up.Create(ctx, "acme", "attachments[2]", c.name, c.mediaType, c.data)
		var r *Refusal
		if !errors.As(err, &r) || r.Code != c.code || r.Field != "attachments[2]" || !strings.Contains(err.Error(), "attachments[2]") {
			t.Errorf("%s: Create = %v, want a refusal %s of attachments[2]", name, err, c.code)
		}
	}
	if n, _ := up.Count(ctx, "acme"); n != 0 {
		t.Fatalf("refused files stored: %d", n)
	}
	if _, err := up.Check(ctx, "acme", "file", "", "", data); err != nil {
		t.Fatalf("Check = %v", err)
	}
	if n, _ := up.Count(ctx, "acme"); n != 0 {
		t.Errorf("Check stored %d files, want none", n)
	}
	if _, err := up.Create(ctx, "acme", "file", "", "", data); err != nil {
		t.Fatal(err)
	}
	if _, err := up.Create(ctx, "acme", "file", "", "", data); refusalCode(err) != TooManyFiles {
		t.Errorf("a second file of a tenant with room for one = %v, want %s", err, TooManyFiles)
	}
	if _, err := up.Create(ctx, "globex", "file", "", "", data); err != nil {
		t.Errorf("another tenant's first file = %v", err)
	}
	st.failCount = errors.New("store down")
	if _, err := up.Create(ctx, "initech", "file", "", "", data); err == nil || refusalCode(err) != "" || !errors.Is(err, st.failCount) {
		t.Errorf("Create with the store failing = %v, want the store's error, not a refusal", err)
	}
}

// A name is shown, never used as a path: what checkName accepts is short,
// valid UTF-8, and has neither a slash nor a control character.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"shot.png", "a/b", `a\b`, "\x00", "\xff", "é.png", "\u2028", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if checkName(name) != nil {
			return
		}
		if len(name) > MaxNameBytes || !utf8.ValidString(name) || strings.ContainsAny(name, "/\\\x7f") {
			t.Fatalf("accepted %q", name)
		}
		for _, r := range name {
			if r < 0x20 {
				t.Fatalf("accepted %q, with control %U", name, r)
			}
		}
	})
}

// An id names a file in the store and on disk: what ValidID accepts is
// the prefix and a canonical UUID, nothing that walks a path.
func FuzzValidID(f *testing.F) {
	id, err := newID()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{id, strings.ToUpper(id), "file-../../x", "file-", id + "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if !ValidID(id) {
			return
		}
		if len(id) != len(idPrefix)+36 || strings.ContainsAny(id, "/\\.") || strings.ToLower(id) != id {
			t.Fatalf("accepted %q", id)
		}
	})
}
