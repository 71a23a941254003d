package unpack

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// unzip unpacks the zip that is the whole source, then checks its links
// once more.
func (u *unpacker) unzip(size int64) error {
	zr, err := zip.NewReader(u.src, size)
	// With GODEBUG=zipinsecurepath=0 the reader flags what the unpacker
	// refuses by itself, with the entry's name.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return u.corrupt("", err)
	}
	if len(zr.File) > u.lim.Entries {
		return &Error{Code: CodeTooManyEntries, Message: fmt.Sprintf("the archive holds more than %d entries", u.lim.Entries)}
	}
	// The central directory was read whole; the ratio weighs what the
	// files' bytes unpack to against the bytes read for them.
	u.src.n = 0
	for _, f := range zr.File {
		e, err := u.zipEntry(f)
		if err != nil {
			return err
		}
		if err := u.add(e); err != nil {
			return err
		}
	}
	return u.checkLinks()
}

// zipEntry is what a zip's header says an entry makes; a symbolic link
// keeps its target as its content, which is read here.
func (u *unpacker) zipEntry(f *zip.File) (entry, error) {
	e := entry{name: f.Name, zip: true}
	mode := f.Mode()
	switch {
	case mode&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return entry{}, entryError(CodeSpecialFile, f.Name, "devices are not unpacked")
	case mode&fs.ModeNamedPipe != 0:
		return entry{}, entryError(CodeSpecialFile, f.Name, "FIFOs are not unpacked")
	case mode&fs.ModeSocket != 0:
		return entry{}, entryError(CodeSpecialFile, f.Name, "sockets are not unpacked")
	case mode&fs.ModeSymlink != 0:
		target, err := u.zipLink(f)
		e.kind, e.link = kindSymlink, target
		return e, err
	case mode.IsDir() || strings.HasSuffix(f.Name, "/"):
		e.kind = kindDir
	case mode.IsRegular():
		e.kind, e.exec, e.open = kindFile, mode&0o111 != 0, f.Open
		e.size = int64(min(f.UncompressedSize64, 1<<62))
	default:
		return entry{}, entryError(CodeSpecialFile, f.Name, "entries of mode %v are not unpacked", mode.Type())
	}
	return e, nil
}

// zipLink reads a link's target, bounded however the entry is packed.
func (u *unpacker) zipLink(f *zip.File) (string, error) {
	rc, err := f.Open()
	if err != nil {
		return "", u.corrupt(f.Name, err)
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, maxLinkBytes+1))
	if err != nil {
		return "", u.corrupt(f.Name, err)
	}
	return string(target), nil
}
