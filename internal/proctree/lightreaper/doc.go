// Package lightreaper, imported for its side effect, makes a binary a
// light reaper for a run (see proctree.Reap): started with
// proctree.ReaperArg, it reaps in C, in a constructor that runs before the
// Go runtime starts and exits before the runtime would (reaper.c). The run
// then costs one thread and about a megabyte resident for its reaper,
// started in about a millisecond, instead of the Go runtime's threads, heap
// and start, and, for the gateway's binary, the initialisation of every
// package it imports.
//
// It needs cgo. Built without it, the package is empty, and the binary's
// main must see proctree.ReaperArg itself and call proctree.Reap, as
// cmd/gateway and cmd/agentgate-reaper do. The C is proctree.Reap step by
// step, and proctree's reaper tests run both.
package lightreaper
