package webhooks

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/auth"
	"github.com/agentgate/agentgate/internal/filewatch"
)

// AnonymousTenant names, in the tenants file, the one tenant of a gateway
// without API keys (whose tenant is "").
const AnonymousTenant = "-"

// TenantHook is the webhook the operator set for one tenant.
type TenantHook struct {
	// URL receives the events of every run of the tenant.
	URL string
	// Secrets sign the tenant's webhooks, its runs' own URLs too,
	// instead of the gateway's secret; nil: the gateway's.
	Secrets []Secret
}

// Tenants is a parsed tenants file: tenant → its hook. Immutable.
type Tenants struct {
	hooks map[string]TenantHook
}

// Lookup returns the tenant's hook.
func (t *Tenants) Lookup(tenant string) (TenantHook, bool) {
	if t == nil {
		return TenantHook{}, false
	}
	h, ok := t.hooks[tenant]
	return h, ok
}

// Len is how many tenants have a hook.
func (t *Tenants) Len() int {
	if t == nil {
		return 0
	}
	return len(t.hooks)
}

// Limits of the tenants file, so that a wrong path fails fast.
const (
	maxTenantsLine  = 8 << 10
	maxTenantsFile  = 4 << 20
	maxTenantsHooks = 100_000
)

// TenantsError is a tenants file that is not valid; Line (from 1) says
// where. Its message never quotes the line, which may hold a secret.
type TenantsError struct {
	Line int
	Msg  string
}

func (e *TenantsError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseTenants reads a tenants file: one tenant a line,
//
//	<tenant> <url> [<secret>[,<previous secret>…]]
//
// fields separated by spaces or tabs; blank lines and lines whose first
// non-blank character is # are ignored. The tenant is an API key's tenant
// ([a-z0-9][a-z0-9_.-]{0,62}) or AnonymousTenant; each appears once.
// check validates each URL (Policy.CheckURL); a line without a secret is
// valid only when haveDefault says the gateway has one. Errors but a read
// error are a *TenantsError.
func ParseTenants(r io.Reader, check func(string) error, haveDefault bool) (*Tenants, error) {
	t := &Tenants{hooks: map[string]TenantHook{}}
	first := map[string]int{}
	br := bufio.NewReaderSize(r, maxTenantsLine)
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, &TenantsError{n, fmt.Sprintf("longer than %d bytes", maxTenantsLine)}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read tenants file: %w", err)
		}
		line := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if n == 1 {
			line = strings.TrimPrefix(line, "\ufeff")
		}
		if msg := t.parseLine(line, n, first, check, haveDefault); msg != "" {
			return nil, &TenantsError{n, msg}
		}
		if errors.Is(err, io.EOF) {
			return t, nil
		}
	}
}

func (t *Tenants) parseLine(line string, n int, first map[string]int, check func(string) error, haveDefault bool) string {
	f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return ""
	}
	if len(f) < 2 || len(f) > 3 {
		return fmt.Sprintf("%d fields, want 2 or 3: <tenant> <url> [<secret>]", len(f))
	}
	tenant := f[0]
	if tenant != AnonymousTenant && !auth.ValidName(tenant) {
		return "tenant is not [a-z0-9][a-z0-9_.-]{0,62} or " + AnonymousTenant
	}
	if tenant == AnonymousTenant {
		tenant = ""
	}
	if at, dup := first[tenant]; dup {
		return fmt.Sprintf("tenant %q appears again (first on line %d)", f[0], at)
	}
	if check != nil {
		if err := check(f[1]); err != nil {
			// The reason only: a URL may hold a token.
			var inv *InvalidURLError
			if errors.As(err, &inv) {
				return "the URL " + inv.Reason
			}
			return "the URL is refused: an internal address not in AGENTGATE_WEBHOOK_ALLOW_HOSTS"
		}
	}
	h := TenantHook{URL: f[1]}
	if len(f) == 3 {
		secrets, err := ParseSecrets(f[2])
		if err != nil {
			return err.Error()
		}
		h.Secrets = secrets
	} else if !haveDefault {
		return "no secret, and the gateway has none (AGENTGATE_WEBHOOK_SECRET): add one as a third field"
	}
	if len(t.hooks) >= maxTenantsHooks {
		return fmt.Sprintf("more than %d tenants", maxTenantsHooks)
	}
	first[tenant] = n
	t.hooks[tenant] = h
	return ""
}

// TenantsFile is a tenants file kept current: Tenants always returns the
// last valid version. Safe for concurrent use.
type TenantsFile struct {
	path string
	log  *zap.Logger
	cur  atomic.Pointer[Tenants]
	done chan struct{}
}

// WatchTenants loads the tenants file at path and, every interval (1 s
// when not positive) until ctx ends, reads it again when its size, times or
// inode change. A version that is missing or invalid is logged, with its
// line, and the last valid one kept; an empty one too, since an editor
// saving in place truncates first. It fails if the file is not valid now.
func WatchTenants(ctx context.Context, path string, check func(string) error, haveDefault bool, log *zap.Logger, interval time.Duration) (*TenantsFile, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if interval <= 0 {
		interval = time.Second
	}
	f := &TenantsFile{path: path, log: log.With(zap.String("path", path)), done: make(chan struct{})}
	w, t, err := filewatch.Load(path, filewatch.Format[*Tenants]{
		Name:   "webhooks file",
		MaxLen: maxTenantsFile,
		Empty:  errors.New("empty (a file of no webhooks needs at least a comment)"),
		Parse: func(data []byte) (*Tenants, error) {
			return ParseTenants(bytes.NewReader(data), check, haveDefault)
		},
		Invalid: filewatch.InvalidAs(func(e *TenantsError) int { return e.Line }),
	})
	if err != nil {
		return nil, err
	}
	f.cur.Store(t)
	go func() {
		defer close(f.done)
		w.Watch(ctx, interval, f.log, func(t *Tenants) {
			f.cur.Store(t)
			f.log.Info("webhooks file reloaded", zap.Int("tenants", t.Len()))
		})
	}()
	return f, nil
}

// Tenants returns the current version of the file.
func (f *TenantsFile) Tenants() *Tenants { return f.cur.Load() }

// Path is the file's path as given, for the sandbox to hide.
func (f *TenantsFile) Path() string { return f.path }

// Wait returns once the watch has stopped (its ctx ended).
func (f *TenantsFile) Wait() { <-f.done }
