package webhooks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func checkWith(t *testing.T, entries ...string) func(string) error {
	t.Helper()
	p, err := ParseAllowList(entries)
	if err != nil {
		t.Fatal(err)
	}
	return func(u string) error { _, err := p.CheckURL(u); return err }
}

func TestParseTenants(t *testing.T) {
	sec := specVectors[0].secret
	file := "\ufeff# tenant url secret\n" +
		"acme   https://hooks.acme.example/agentgate?token=t0k " + sec + "," + specVectors[1].secret + "\r\n" +
		"\n   # indented comment\n" +
		"globex\thttps://hooks.globex.example/x\n" +
		"- http://127.0.0.1:9000/anon" // no final newline
	tn, err := ParseTenants(strings.NewReader(file), checkWith(t, "127.0.0.1"), true)
	if err != nil {
		t.Fatal(err)
	}
	if tn.Len() != 3 {
		t.Fatalf("%d tenants", tn.Len())
	}
	acme, ok := tn.Lookup("acme")
	if !ok || acme.URL != "https://hooks.acme.example/agentgate?token=t0k" || len(acme.Secrets) != 2 {
		t.Errorf("acme = %+v", acme)
	}
	if g, _ := tn.Lookup("globex"); g.Secrets != nil {
		t.Errorf("globex has secrets of its own: %+v", g)
	}
	if anon, ok := tn.Lookup(""); !ok || anon.URL != "http://127.0.0.1:9000/anon" {
		t.Errorf("anonymous tenant = %+v, %v", anon, ok)
	}
	if _, ok := tn.Lookup("initech"); ok {
		t.Error("a tenant without a line has a hook")
	}

	for name, c := range map[string]struct {
		file        string
		haveDefault bool
		line        int
		says        string
	}{
		"one field":          {"acme\n", true, 1, "1 fields"},
		"four fields":        {"acme https://a.example/ " + sec + " x\n", true, 1, "4 fields"},
		"bad tenant":         {"# c\nAcme https://a.example/\n", true, 2, "tenant is not"},
		"duplicate":          {"acme https://a.example/\nacme https://b.example/\n", true, 2, "first on line 1"},
		"http to a public":   {"acme http://a.example/\n", true, 1, "must be an https URL"},
		"internal":           {"acme https://10.0.0.1/\n", true, 1, "refused"},
		"bad secret":         {"acme https://a.example/ whsec_c2hvcnQ=\n", true, 1, "24 to 64 bytes"},
		"no secret anywhere": {"acme https://a.example/\n", false, 1, "no secret"},
		"long line":          {"acme https://a.example/" + strings.Repeat("a", maxTenantsLine) + "\n", true, 1, "longer than"},
	} {
		_, err := ParseTenants(strings.NewReader(c.file), checkWith(t), c.haveDefault)
		var te *TenantsError
		if !errors.As(err, &te) || te.Line != c.line || !strings.Contains(te.Msg, c.says) {
			t.Errorf("%s: %v, want line %d saying %q", name, err, c.line, c.says)
			continue
		}
		if strings.Contains(err.Error(), "whsec_") || strings.Contains(err.Error(), "a.example") {
			t.Errorf("%s: the error quotes the line: %v", name, err)
		}
	}
	if tn, err := ParseTenants(strings.NewReader("# none\n"), nil, false); err != nil || tn.Len() != 0 {
		t.Errorf("a file of comments = %v, %v", tn, err)
	}
}

func TestWatchTenantsReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "webhooks")
	write := func(s string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := WatchTenants(context.Background(), path, nil, true, nil, 0); err == nil {
		t.Fatal("WatchTenants of a missing file succeeded")
	}
	write("acme https://a.example/\n")
	ctx, cancel := context.WithCancel(context.Background())
	core, logs := observer.New(zapcore.InfoLevel)
	f, err := WatchTenants(ctx, path, checkWith(t), true, zap.New(core), 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); f.Wait() }()
	waitURL := func(tenant, want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			h, _ := f.Tenants().Lookup(tenant)
			if h.URL == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("tenant %s has URL %q, never %q", tenant, h.URL, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitURL("acme", "https://a.example/")
	write("acme https://b.example/\nglobex https://g.example/\n")
	waitURL("globex", "https://g.example/")
	// An invalid version is ignored, the last valid one kept; the next
	// valid one is read.
	write("acme https://10.0.0.1/\n")
	deadline := time.Now().Add(20 * time.Second)
	for logs.FilterMessage("webhooks file not reloaded, keeping the last valid version").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the invalid version was never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if h, _ := f.Tenants().Lookup("acme"); h.URL != "https://b.example/" {
		t.Errorf("after an invalid version acme has %q, want the last valid one's", h.URL)
	}
	write("") // an editor's truncation, too
	write("acme https://c.example/\n")
	waitURL("acme", "https://c.example/")
	if _, ok := f.Tenants().Lookup("globex"); ok {
		t.Error("a tenant removed from the file kept its hook")
	}
	if f.Path() != path {
		t.Errorf("Path() = %s", f.Path())
	}
}
