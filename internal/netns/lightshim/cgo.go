//go:build cgo && linux

package lightshim

// shim.c does a shim's whole work in a constructor, before the Go runtime
// starts; importing C is what builds it into the binary.

import "C"
