package diskguard

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// Defaults and bounds of Options.
const (
	// DefaultReserve is the reserve when Options.Reserve is 0: room for the
	// final events and records of many runs, each event at most a few
	// hundred KiB.
	DefaultReserve = 64 << 20
	// DefaultInterval is how often the guard looks when Options.Interval
	// is 0. A statfs and the server's health check cost microseconds.
	DefaultInterval = 500 * time.Millisecond
	// ReserveFile is the reserve's name in Options.StoreDir.
	ReserveFile = ".agentgate-reserve"
	// capDivisor caps the reserve and the low-water mark each to a 16th of
	// their filesystem, so that a small disk is not taken by its guard.
	capDivisor = 16
	// minSettle is how long the free space must have stopped falling
	// before the reserve goes: longer than a filler is plausibly paused
	// on a busy machine.
	minSettle = time.Second
	// minBackoff and maxBackoff bound the wait between two restarts of
	// the store's JetStream that did not make it healthy.
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

var (
	// ErrDiskLow is wrapped by Healthy when a watched filesystem has less
	// free space than its low-water mark, or the store's reserve is not
	// held (it was used, and there is not yet room to make it again).
	ErrDiskLow = errors.New("disk space low")
	// ErrStoreFailed is wrapped by Healthy when the store reports that it
	// cannot write.
	ErrStoreFailed = errors.New("store cannot write")
)

// Store is the store a Guard watches and recovers; *store.Embedded is one.
type Store interface {
	// Health returns nil when the store can write what it is sent.
	Health() error
	// RestartJetStream reloads the store from its files, clearing what
	// made Health fail once the disk has room again.
	RestartJetStream() error
}

// Options configure New.
type Options struct {
	// StoreDir is the directory of the embedded store's files; the reserve
	// is kept in it. Empty for a store on a NATS server elsewhere: then no
	// reserve is kept and Store is not used.
	StoreDir string
	// Store is the embedded store in StoreDir, or nil.
	Store Store
	// Dirs are more directories whose filesystems must keep LowWater free
	// (the workspaces, the agents' homes). A filesystem is watched once
	// however many directories it holds.
	Dirs []string
	// Reserve is how many bytes the reserve holds; 0 means
	// DefaultReserve, and a negative value keeps none. It is capped to a
	// 16th of the store's filesystem.
	Reserve int64
	// LowWater is the free space, in bytes, below which a filesystem is
	// low; 0 means the reserve's size, or DefaultReserve without one. It
	// is capped to a 16th of each filesystem.
	LowWater int64
	// Interval is how often the guard looks; 0 means DefaultInterval.
	Interval time.Duration
	// Log receives what the guard does; nil discards.
	Log *zap.Logger
}

// fsys is one watched filesystem.
type fsys struct {
	dev  uint64
	dirs []string // the watched directories on it; dirs[0] is statted
	size int64
	low  int64 // the low-water mark, capped
	free int64 // at this look
	prev int64 // at the look before; -1 before the second look
	// fell is when a look last saw the free space fall by more than the
	// store's own writes explain.
	fell  time.Time
	store bool // holds StoreDir
}

// Guard watches free space and the store's health. Its methods are safe
// for concurrent use.
type Guard struct {
	store       Store
	fss         []*fsys // the store's first, when there is one
	reservePath string
	reserve     int64 // capped; 0 when none is kept
	interval    time.Duration
	settle      time.Duration // see minSettle
	log         *zap.Logger

	// Owned by the checking goroutine (New, then Run).
	held        bool
	lastRestart time.Time
	backoff     time.Duration
	key         string // what made the last state, to notice changes

	mu    sync.Mutex
	err   error
	subs  []func(error)
	holds []func() bool
	stat  []FS
}

// FS is what Status reports about one watched filesystem.
type FS struct {
	// Dirs are the watched directories on it.
	Dirs []string
	// Size and Free are its size and the bytes an unprivileged process
	// may still write, at the last look.
	Size, Free int64
	// LowWater is its mark; Reserve the bytes held in reserve on it.
	LowWater, Reserve int64
}

// New checks the directories, which must exist, makes or keeps the
// reserve when there is room for it, and looks once, so that Healthy is
// meaningful from the start. A disk that is already full is not an error:
// the guard starts unhealthy.
func New(opts Options) (*Guard, error) {
	if opts.LowWater < 0 || opts.Interval < 0 {
		return nil, fmt.Errorf("disk guard: negative option: low water %d, interval %s", opts.LowWater, opts.Interval)
	}
	if opts.StoreDir == "" && opts.Store != nil {
		return nil, errors.New("disk guard: a store without its directory")
	}
	g := &Guard{store: opts.Store, interval: opts.Interval, log: opts.Log, backoff: minBackoff}
	if g.interval == 0 {
		g.interval = DefaultInterval
	}
	g.settle = max(minSettle, 2*g.interval)
	if g.log == nil {
		g.log = zap.NewNop()
	}
	dirs := opts.Dirs
	if opts.StoreDir != "" {
		dirs = append([]string{opts.StoreDir}, dirs...)
	}
	for i, dir := range dirs {
		var st unix.Stat_t
		if err := unix.Stat(dir, &st); err != nil {
			return nil, fmt.Errorf("disk guard: %s: %w", dir, err)
		}
		var f *fsys
		for _, o := range g.fss {
			if o.dev == uint64(st.Dev) {
				f = o
			}
		}
		if f == nil {
			var sf unix.Statfs_t
			if err := unix.Statfs(dir, &sf); err != nil {
				return nil, fmt.Errorf("disk guard: %s: %w", dir, err)
			}
			f = &fsys{dev: uint64(st.Dev), prev: -1, size: int64(sf.Blocks) * sf.Bsize, store: i == 0 && opts.StoreDir != ""}
			g.fss = append(g.fss, f)
		}
		f.dirs = append(f.dirs, dir)
	}

	if opts.StoreDir != "" {
		sfs := g.fss[0]
		g.reservePath = filepath.Join(opts.StoreDir, ReserveFile)
		switch {
		case opts.Reserve < 0:
		case opts.Reserve == 0:
			g.reserve = min(DefaultReserve, sfs.size/capDivisor)
		default:
			g.reserve = min(opts.Reserve, sfs.size/capDivisor)
		}
		if g.reserve == 0 {
			// A reserve kept by an earlier start with other settings
			// would only take space.
			removeReserve(g.reservePath)
		}
		if len(sfs.dirs) > 1 {
			g.log.Warn("the store shares its filesystem with "+strings.Join(sfs.dirs[1:], ", ")+
				": an agent that fills it stops the store until its runs are stopped; put the workspaces on another filesystem",
				zap.String("store_dir", opts.StoreDir))
		}
	}
	for _, f := range g.fss {
		low := opts.LowWater
		if low == 0 {
			low = g.reserve
			if low == 0 {
				low = DefaultReserve
			}
		}
		f.low = min(low, f.size/capDivisor)
	}
	if g.reserve > 0 {
		g.held = reserveHeld(g.reservePath, g.reserve)
	}
	g.check()
	g.log.Info("disk guard started", zap.Int64("reserve_bytes", g.reserve), zap.Strings("dirs", dirs),
		zap.Bool("healthy", g.Healthy() == nil), zap.Duration("interval", g.interval))
	return g, nil
}

// Run looks every Options.Interval until ctx ends, and returns nil then.
// The reserve stays on disk for the next start.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTicker(g.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			g.check()
		}
	}
}

// Healthy returns nil when every watched filesystem is above its mark,
// the reserve is held and the store can write; otherwise an error saying
// why, wrapping ErrDiskLow, ErrStoreFailed or both. It reports the last
// look, at most Options.Interval old, and does no I/O.
func (g *Guard) Healthy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// OnChange registers f, called with Healthy's new answer whenever the
// guard turns healthy or unhealthy, or unhealthy for another reason. The
// calls come one at a time from the guard's goroutine, in the order
// registered, and must not block; f is not called for the state at
// registration.
func (g *Guard) OnChange(f func(err error)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subs = append(g.subs, f)
}

// HoldReserveWhile registers busy, asked before the reserve is released:
// while it reports true, something that may still fill the disk is being
// stopped (the runs stopped for a low disk, whose processes are not all
// gone yet), and the freed blocks would go to it rather than to the
// store, so the reserve is kept. busy is called from the guard's
// goroutine and must not block.
func (g *Guard) HoldReserveWhile(busy func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holds = append(g.holds, busy)
}

// holding reports whether a function given to HoldReserveWhile asks to
// keep the reserve.
func (g *Guard) holding() bool {
	g.mu.Lock()
	holds := g.holds
	g.mu.Unlock()
	for _, busy := range holds {
		if busy() {
			return true
		}
	}
	return false
}

// Status returns the watched filesystems as at the last look, the store's
// first, for metrics.
func (g *Guard) Status() []FS {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]FS(nil), g.stat...)
}

// check looks once: it uses or makes the reserve, restarts a failed store
// when there is room, and publishes the outcome.
func (g *Guard) check() {
	var problems []error
	var key strings.Builder
	for _, f := range g.fss {
		g.statfs(f)
		if f.store && g.reserve > 0 {
			g.keepReserve(f)
		}
		switch {
		case f.free < f.low:
			problems = append(problems, fmt.Errorf("%w: %s has %s free, below its low-water mark of %s",
				ErrDiskLow, f.dirs[0], size(f.free), size(f.low)))
			fmt.Fprintf(&key, "low %s;", f.dirs[0])
		case f.store && g.reserve > 0 && !g.held:
			problems = append(problems, fmt.Errorf("%w: %s has %s free, too little to make the store's reserve of %s again above the low-water mark of %s",
				ErrDiskLow, f.dirs[0], size(f.free), size(g.reserve), size(f.low)))
			fmt.Fprintf(&key, "unreserved %s;", f.dirs[0])
		}
	}
	if g.store != nil {
		if err := g.storeHealth(g.fss[0]); err != nil {
			problems = append(problems, fmt.Errorf("%w: %w", ErrStoreFailed, err))
			key.WriteString("store;")
		}
	}
	err := errors.Join(problems...)

	stat := make([]FS, len(g.fss))
	for i, f := range g.fss {
		f.prev = f.free
		stat[i] = FS{Dirs: f.dirs, Size: f.size, Free: f.free, LowWater: f.low}
		if f.store && g.held {
			stat[i].Reserve = g.reserve
		}
	}
	g.mu.Lock()
	g.err, g.stat = err, stat
	subs := g.subs
	g.mu.Unlock()

	if key.String() == g.key {
		return
	}
	g.key = key.String()
	if err != nil {
		g.log.Error("disk guard: unhealthy", zap.Error(err))
	} else {
		g.log.Info("disk guard: healthy")
	}
	for _, f := range subs {
		f(err)
	}
}

// statfs refreshes f's free space; a failed statfs counts as none free.
func (g *Guard) statfs(f *fsys) {
	var sf unix.Statfs_t
	if err := unix.Statfs(f.dirs[0], &sf); err != nil {
		g.log.Error("disk guard: statfs failed", zap.String("dir", f.dirs[0]), zap.Error(err))
		f.free = 0
		return
	}
	f.size = int64(sf.Blocks) * sf.Bsize
	f.free = int64(sf.Bavail) * sf.Bsize
}

// keepReserve releases the reserve when f is low and nothing is filling
// it any more, and makes it again once it fits above the mark.
//
// Released while something still fills the disk, the reserve would only
// feed it: an agent writing a file takes the freed blocks in microseconds,
// and the store is left with none. So the reserve goes only once the free
// space has stopped falling (by more than a 64th of the mark between two
// looks, for the store's own small writes) for a while (settle): soon
// after a filler met ENOSPC and gave up, or after its run was stopped. A
// filler that pauses longer than that and goes on still takes the reserve;
// then the store fails, and is restarted once space is back. Settled is
// not enough on a disk that is full: its free space cannot fall further
// while the filler still lives and retries, so the reserve also waits for
// HoldReserveWhile's functions to say that what they stop is gone.
func (g *Guard) keepReserve(f *fsys) {
	now := time.Now()
	if f.prev < 0 || f.prev-f.free > f.low/64 {
		f.fell = now
	}
	settled := f.prev >= 0 && f.fell.Before(now) && now.Sub(f.fell) >= g.settle
	switch {
	case g.held && f.free < f.low && !settled:
		g.log.Debug("disk guard: store filesystem low and still filling, reserve kept",
			zap.String("dir", f.dirs[0]), zap.Int64("free_bytes", f.free), zap.Int64("prev_free_bytes", f.prev))
	case g.held && f.free < f.low && g.holding():
		// A full disk stops falling at once; what filled it may still
		// be alive and retrying.
		g.log.Debug("disk guard: store filesystem low and what may fill it is still being stopped, reserve kept",
			zap.String("dir", f.dirs[0]), zap.Int64("free_bytes", f.free))
	case g.held && f.free < f.low:
		if err := removeReserve(g.reservePath); err != nil {
			g.log.Error("disk guard: cannot release the reserve", zap.String("path", g.reservePath), zap.Error(err))
			return
		}
		g.held = false
		g.log.Warn("disk guard: store filesystem low, reserve released for the store",
			zap.String("dir", f.dirs[0]), zap.Int64("free_bytes", f.free), zap.Int64("reserve_bytes", g.reserve))
		g.statfs(f)
	case !g.held && f.free >= f.low+g.reserve:
		if err := makeReserve(g.reservePath, g.reserve); err != nil {
			g.log.Warn("disk guard: cannot make the reserve", zap.String("path", g.reservePath), zap.Error(err))
			return
		}
		g.held = true
		g.log.Info("disk guard: reserve made", zap.String("path", g.reservePath), zap.Int64("reserve_bytes", g.reserve))
		g.statfs(f)
	}
}

// storeHealth asks the store, and restarts its JetStream when it failed
// and f has room for the restart, at most once per backoff.
func (g *Guard) storeHealth(f *fsys) error {
	err := g.store.Health()
	if err == nil {
		g.backoff = minBackoff
		return nil
	}
	// The restart writes the streams' index files; half the mark is room
	// for that and for the first writes after it.
	if f.free < f.low/2 || time.Since(g.lastRestart) < g.backoff {
		return err
	}
	g.lastRestart = time.Now()
	g.log.Warn("disk guard: store cannot write, restarting its jetstream", zap.Error(err), zap.Int64("free_bytes", f.free))
	if rerr := g.store.RestartJetStream(); rerr != nil {
		g.log.Error("disk guard: jetstream restart failed", zap.Error(rerr))
	}
	if err = g.store.Health(); err != nil {
		g.backoff = min(2*g.backoff, maxBackoff)
		return err
	}
	g.log.Info("disk guard: store writes again after a jetstream restart")
	g.backoff = minBackoff
	return nil
}

// size formats n bytes for a person.
func size(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
