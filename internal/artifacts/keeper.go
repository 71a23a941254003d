package artifacts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// DefaultMaxArchiveBytes bounds the files of GET /v1/runs/{id}/archive
// when KeeperConfig.MaxArchiveBytes is not set.
const DefaultMaxArchiveBytes = 1 << 30

// KeeperConfig is what a Keeper is made with.
type KeeperConfig struct {
	// Dir, when set, is where each run's snapshot and whole diff are
	// kept, in a directory named after the run: under the data
	// directory, which the sandbox hides from agents. Without it no
	// changed files are found, and only an adapter's own diff is
	// recorded.
	Dir string
	// Replica names this gateway replica: a run that another one ran
	// has its directory there, not here.
	Replica string
	// TenantRoot returns the workspace root of a tenant's runs, under
	// which a run's cwd is resolved; an error means the tenant has none
	// here.
	TenantRoot func(tenant string) (string, error)
	// Limits bound each snapshot and its diff (zero fields take their
	// defaults).
	Limits Limits
	// MaxArchiveBytes bounds the files of one archive (default
	// DefaultMaxArchiveBytes).
	MaxArchiveBytes int64
}

// Keeper keeps the artifacts of the runs of one replica: a snapshot of a
// run's directory while its agent runs, and its whole diff and list of
// changes beside it when the run's record cannot hold them. It serves
// them, and the run's files, to the artifact routes.
type Keeper struct {
	cfg KeeperConfig
	log *zap.Logger
}

// NewKeeper returns a Keeper; log gets what it cannot remove.
func NewKeeper(cfg KeeperConfig, log *zap.Logger) *Keeper {
	if cfg.MaxArchiveBytes <= 0 {
		cfg.MaxArchiveBytes = DefaultMaxArchiveBytes
	}
	return &Keeper{cfg: cfg, log: log}
}

// storeOf is where the run id's snapshot lives, or "" when the keeper
// keeps none.
func (k *Keeper) storeOf(id string) string {
	if k.cfg.Dir == "" {
		return ""
	}
	return filepath.Join(k.cfg.Dir, id)
}

// ResultPath is where run id's whole diff and changes are kept, a
// directory for Load, and the files of it that hold them; "" when the
// keeper keeps nothing.
func (k *Keeper) ResultPath(id string) (string, []string) {
	return k.storeOf(id), []string{diffFile, resultFile}
}

// HasResult reports whether this replica keeps run id's whole diff and
// changes.
func (k *Keeper) HasResult(id string) bool {
	store := k.storeOf(id)
	if store == "" {
		return false
	}
	_, _, _, err := Load(store)
	return err == nil
}

// restoredDir holds, under Dir, the copies of runs' directories restored
// from the cluster to be served here.
const restoredDir = "restored"

// RestoredPath is where a copy of run id's directory, restored from the
// cluster, is kept to be served; "" when the keeper keeps nothing.
func (k *Keeper) RestoredPath(id string) string {
	if k.cfg.Dir == "" {
		return ""
	}
	return filepath.Join(k.cfg.Dir, restoredDir, id)
}

// SweepRestored removes the restored copies made before cutoff: they are
// copies of what the cluster keeps, restored again when asked for, and
// must not fill the disk however long runs are retained.
func (k *Keeper) SweepRestored(cutoff time.Time) {
	if k.cfg.Dir == "" {
		return
	}
	dir := filepath.Join(k.cfg.Dir, restoredDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			k.log.Warn("remove a restored copy", zap.String("path", e.Name()), zap.Error(err))
		}
	}
}

// Remove removes the run id's snapshot and diff, and its restored copy.
func (k *Keeper) Remove(id string) {
	for _, p := range []string{k.storeOf(id), k.RestoredPath(id)} {
		if p == "" {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			k.log.Warn("remove a run's snapshot", zap.String("run_id", id), zap.Error(err))
		}
	}
}

// Sweep removes the snapshots of runs created before cutoff, as the
// workspace's retention removes their directories: their diff and list
// of changes then come from their record. A run for which busy is true
// still executes here, and keeps its snapshot.
func (k *Keeper) Sweep(cutoff time.Time, busy func(id string) bool) {
	if k.cfg.Dir == "" {
		return
	}
	for _, dir := range []string{k.cfg.Dir, filepath.Join(k.cfg.Dir, restoredDir)} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				k.log.Warn("sweep snapshots", zap.Error(err))
			}
			continue
		}
		for _, e := range entries {
			if createdBefore(strings.TrimSuffix(e.Name(), ".part"), cutoff) && !busy(e.Name()) {
				if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
					k.log.Warn("remove a run's snapshot", zap.String("path", e.Name()), zap.Error(err))
				}
			}
		}
	}
}

// createdBefore reports whether name is a run's id (a UUIDv7, which
// holds its creation time) created before cutoff.
func createdBefore(name string, cutoff time.Time) bool {
	id, err := uuid.Parse(name)
	if err != nil || id.Version() != 7 || id.String() != name {
		return false
	}
	sec, nsec := id.Time().UnixTime()
	return !time.Unix(sec, nsec).After(cutoff)
}
