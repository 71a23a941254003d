//go:build cgo && linux

package lightreaper

// reaper.c does a reaper's whole work in a constructor, before the Go
// runtime starts; importing C is what builds it into the binary.

import "C"
