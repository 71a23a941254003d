package adapterkit

import "os"

// IsELF reports whether the file at path starts with the ELF magic number:
// a native binary rather than the Node launcher or shell stub an npm
// package installs in front of it. A file that cannot be read is not.
func IsELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == "\x7fELF"
}
