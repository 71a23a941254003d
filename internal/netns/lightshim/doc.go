// Package lightshim, imported for its side effect, makes a binary a light
// network shim for a run (see netns.RunShim): started with netns.ShimArg,
// it listens on netns.ProxyAddr, hands the listener to the gateway and
// execs the CLI in C, in a constructor that runs before the Go runtime
// starts (shim.c). A run's shim then costs an exec and a few system calls
// instead of the Go runtime's start and, for the gateway's binary, the
// initialisation of every package it imports: on a busy machine that was
// a large part of a confined run's start.
//
// It needs cgo and glibc, as lightreaper does. Without them the package
// is empty, and the binary's main must see netns.ShimArg itself and call
// netns.RunShim, as cmd/gateway and cmd/agentgate-reaper do. The C is
// netns.RunShim step by step, and netns's shim tests run both.
package lightshim
