package unpack

import (
	"archive/tar"
	"errors"
	"io"
)

// untar unpacks a tar read from r, then checks its links once more.
func (u *unpacker) untar(r io.Reader) error {
	tr := tar.NewReader(r)
	body := func() (io.ReadCloser, error) { return io.NopCloser(tr), nil }
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return u.checkLinks()
		}
		// With GODEBUG=tarinsecurepath=0 the reader flags what the
		// unpacker refuses by itself, with the entry's name.
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) {
			return u.corrupt("", err)
		}
		e, err := tarEntry(hdr, body)
		if err != nil {
			return err
		}
		if err := u.add(e); err != nil {
			return err
		}
	}
}

// tarEntry is what a tar header says an entry makes.
func tarEntry(hdr *tar.Header, body func() (io.ReadCloser, error)) (entry, error) {
	e := entry{name: hdr.Name, link: hdr.Linkname}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		e.kind, e.exec, e.size, e.open = kindFile, hdr.Mode&0o111 != 0, hdr.Size, body
	case tar.TypeDir:
		e.kind = kindDir
	case tar.TypeSymlink:
		e.kind = kindSymlink
	case tar.TypeLink:
		e.kind = kindHardLink
	case tar.TypeXGlobalHeader:
		e.kind = kindSkip
	case tar.TypeChar, tar.TypeBlock:
		return entry{}, entryError(CodeSpecialFile, hdr.Name, "devices are not unpacked")
	case tar.TypeFifo:
		return entry{}, entryError(CodeSpecialFile, hdr.Name, "FIFOs are not unpacked")
	default:
		return entry{}, entryError(CodeSpecialFile, hdr.Name, "entries of type %q are not unpacked", hdr.Typeflag)
	}
	return e, nil
}
