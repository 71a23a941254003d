//go:build !linux

package main

import (
	"io"
	"os"
)

// isTerminal reports whether w is a character device, the nearest test
// without the terminal ioctl of Linux.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is unknown off Linux: the progress line assumes 80.
func terminalWidth(io.Writer) int { return 0 }
