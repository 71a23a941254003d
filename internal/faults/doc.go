// Package faults proves, with real processes, that replicas behind a load
// balancer lose nothing: it starts scripts/rig.sh's deployment on loopback
// (a 3-node nats-server JetStream cluster built from the module in go.mod,
// 3 gateways with NATS_REPLICAS=3, and Debian's nginx serving the shipped
// deploy/nginx/agentgate.conf), drives the real claude CLI against the
// project's mock Anthropic server, and injects the faults an operator
// meets:
//
//   - TestColdStartReplicasAtOnce: 3 replicas started at once on an empty
//     cluster all come up and serve;
//   - TestNATSNodeKilledDuringRuns: kill -9 of a NATS node at seeded random
//     moments (FAULTS_SEED replays a logged seed) during a stream of runs;
//   - TestReplicaKilledMidRun: kill -9 of the replica executing a run: every
//     process of its agent dies, and another replica accounts for the run
//     after REPLICA_TTL;
//   - TestReplicasKilledWithKeys: the same with a keys file of two tenants,
//     one run's tool under way and another's approval pending: both end
//     interrupted, the approval resolved run_ended;
//   - TestRollingRestartThroughNginx: SIGTERM one gateway after another while
//     POSTs keep coming through nginx: no POST fails, and streams resume
//     elsewhere by Last-Event-ID;
//   - TestIdempotencyKeyRetry: a client retrying with the same
//     Idempotency-Key gets the same run; another body is a 422
//     idempotency_mismatch;
//   - TestFullReplicaBesideIdleOnes: with one slot per replica, runs go to
//     whichever replica has a free slot, the shared queue reports positions,
//     and 429 queue_full comes only when the shared queue is full;
//   - TestSessionFollowsTheRunAcrossReplicas: a session resumed turn after
//     turn on whichever replica takes each: the model sees every earlier
//     turn, each turn finds the files the turns before left, every replica
//     serves a finished run's files as it left them, a resume after kill -9
//     of the replica that began the session goes on, and a second resume
//     while one runs is a 409 session_busy;
//   - TestInteractiveRunTakenOverAfterKill: kill -9 of the replica holding
//     an interactive run, between turns and again mid-turn: another
//     replica takes the run over (run.resumed), its next message goes on
//     with the same conversation in the same files as the next turn, the
//     cut turn ends interrupted, and a cancel sent to a third replica
//     ends a run taken over;
//   - TestAHibernatedRunWakesOnAnotherReplica: an interactive run that
//     hibernated on its replica (no process of it left) is woken by a
//     message sent to another replica, which then owns it: the model
//     sees the turn before and the tool finds its file;
//   - TestAHibernatedRunOutlivesItsReplica: kill -9 of the replica a run
//     sleeps on: a message through nginx wakes it on a live replica with
//     its conversation and files, sent at once or after a live replica
//     adopted it, and nothing of it is marked interrupted;
//   - TestAnIdleRunHibernatesWhenItsReplicaStops: SIGTERM of the replica
//     of an idle interactive run puts the run to sleep (reason shutdown)
//     instead of ending it, and it wakes elsewhere;
//   - TestScheduleFiresOnceAcrossAReplicaKill: a schedule every 10 s over
//     65 s, the replica that claimed its fires killed -9 between two of
//     them: 6 or 7 fires, each started once, 10 s apart, with as many runs;
//   - TestScheduleSkipsWhileBusyAcrossReplicas: a schedule every 10 s
//     whose run lasts longer, when_busy skip: one run at a time, the other
//     fires recorded skipped_busy naming it.
//
// Every case checks the same four things of every run it made: no event
// lost, duplicated or reordered (the whole stream, read through nginx with
// resumes and again from every live replica, is seq 1..N with one
// run.completed, last, that agrees with the stored record); no process
// left (none carries the run's id once it is terminal, and nothing of the
// rig is left once it stops); no duplicate run (the listing has exactly one
// run per submission); and every run accounted for (terminal, with a
// status, and an error class unless it succeeded).
//
// The tests run with the rest: `go test ./internal/faults/` (CI runs it in a
// loopback-only network namespace, as scripts/test.sh runs every test).
// They need Debian's nginx (`apt-get install -y nginx-light`), the pinned
// claude CLI (scripts/install-agents.sh), bash, curl and the go command,
// which builds the gateway and nats-server once per run of the package;
// each test fails, never skips, when one is missing. Set FAULTS_KEEP=1 to
// keep a failed case's rig directory (logs, nginx access log, rig.env),
// and FAULTS_BIN to run prebuilt agentgate, nats-server and mockmodel
// binaries (of another commit, say) instead of building them.
package faults
