package egress

import "fmt"

// Mode is a run's network policy: what its agent may reach.
type Mode string

const (
	// Open gives the agent no namespace of its own: it reaches whatever
	// the gateway's host reaches.
	Open Mode = "open"
	// Model lets the agent reach its model API (the policy's Trusted
	// rules) and the run's MCP servers given by URL (its Allowed rules).
	Model Mode = "model"
	// Allow lets the agent reach what Model does and the run's
	// allow_hosts (all in its Allowed rules).
	Allow Mode = "allow"
	// None leaves the agent no way out at all.
	None Mode = "none"
)

// Default is the mode a run gets when it names none.
const Default = Model

// ParseMode reads a mode's API name. Anything but the four names,
// including the empty string (the caller applies Default), is an error
// that lists them.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Open, Model, Allow, None:
		return m, nil
	}
	return "", fmt.Errorf("network %q is not a network policy: use model, allow, open or none", truncate(s, 40))
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
