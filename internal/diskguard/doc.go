// Package diskguard keeps a full disk from breaking the store, and says
// when it has.
//
// A Guard watches the free space of the filesystems that hold the store's
// files and the runs' workspaces. On the store's filesystem it keeps a
// reserve: a file of Options.Reserve bytes whose blocks are really
// allocated (fallocate), ".agentgate-reserve" in the store's directory.
// When that filesystem's free space falls below the low-water mark, most
// often because an agent filled a workspace on the same disk, and has
// stopped falling for a second (a writer still going would take the freed
// blocks first), and nothing registered with HoldReserveWhile says it is
// still stopping what may fill it (the gateway registers its runs stopped
// for the low disk, until their processes are gone), the guard deletes the
// reserve, so that the store has room
// for what it must still write: the last events and final records of the
// runs being stopped. It makes the reserve again once there is room for it
// above the mark.
//
// The guard also asks the embedded store whether it can write (Store). The
// embedded NATS server marks a stream that met a failed write, and stores
// nothing on it any more, even once space is back (see store.Embedded.Health);
// the guard restarts its JetStream, which clears the mark, as soon as there
// is room, with a backoff between tries. So the gateway recovers by itself,
// without a restart of the process.
//
// Healthy says whether all is well: nil, or an error wrapping ErrDiskLow
// (a filesystem is below its mark, or the reserve is not held) or
// ErrStoreFailed (the store cannot write). OnChange tells its callbacks when
// that changes. What to do about it, failing readiness and refusing or
// stopping runs, is the caller's.
//
// The guard only helps the store if it can stop the filling: the freed
// reserve is free space like any other, and an agent that goes on writing
// takes it too. Keeping the workspaces on another filesystem than the store
// (AGENTGATE_WORKSPACE_ROOT) is the sure way; the guard warns at start when
// they share one.
package diskguard
