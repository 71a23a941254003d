package diskguard

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// reserveHeld reports whether path is a file of n bytes whose blocks are
// all allocated: a sparse file, as truncate makes, reserves nothing.
func reserveHeld(path string, n int64) bool {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == n && st.Blocks*512 >= n
}

// makeReserve makes path a file of n allocated bytes. On failure, a full
// disk most often, it leaves no file behind, so that a half-made reserve
// does not take space nobody counts.
func makeReserve(path string, n int64) (err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("make reserve: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("make reserve: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	err = unix.Fallocate(int(f.Fd()), 0, 0, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without fallocate: zeros written hold blocks too.
		err = writeZeros(f, n)
	}
	if err != nil {
		return fmt.Errorf("make reserve of %d bytes: %w", n, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("make reserve: %w", err)
	}
	return nil
}

func writeZeros(f *os.File, n int64) error {
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// removeReserve deletes the reserve; a reserve already gone is no error.
func removeReserve(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release reserve: %w", err)
	}
	return nil
}
