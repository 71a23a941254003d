package runs

import "time"

// An interactive run that waits idle long enough hibernates: its session
// and directory are kept in the cluster (as at every turn's end), its CLI
// and every process of it are stopped, and the run stays running with
// activity Hibernated and no replica holding anything of it but a timer.
// A message wakes it on whichever replica takes the message: the CLI
// starts again there, resuming the kept session in the kept files, and
// the message is the run's next turn (run.resumed, reason woken). A
// close or a cancel ends it without waking it; a steer or an interrupt
// is a 409 run_hibernated. Only an agent that resumes a session from
// the files the gateway keeps hibernates (Interaction.Hibernate).

// Bounds of Spec.HibernateAfterSeconds; an operator's bound is at most
// MaxHibernateAfter.
const (
	MinHibernateAfter = 5 * time.Second
	MaxHibernateAfter = 30 * 24 * time.Hour
)

// RunHibernatedData is the payload of run.hibernated: the run's CLI was
// stopped after its session was kept; the next message wakes it.
type RunHibernatedData struct {
	// Turn is the last turn that finished.
	Turn int `json:"turn"`
	// Replica is the replica that stopped the CLI.
	Replica string `json:"replica"`
	// Reason is why: "idle" (hibernate_after_seconds passed with no
	// turn), "shutdown" (its replica stopped while the run was idle) or
	// "replica_lost" (taken over from a replica that stopped answering).
	Reason string `json:"reason"`
	// ClosesAt is when the run is closed if no message wakes it.
	ClosesAt time.Time `json:"closes_at"`
}

// The reasons of run.hibernated.
const (
	HibernatedIdle        = "idle"
	HibernatedShutdown    = "shutdown"
	HibernatedReplicaLost = "replica_lost"
)
