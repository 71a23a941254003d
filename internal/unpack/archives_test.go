package unpack

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"testing"
)

// member is one entry of an archive built by a test, in either format.
type member struct {
	name string
	mode fs.FileMode
	body string
	// link is a symbolic link's target, or a hard link's first name when
	// hard is set.
	link string
	hard bool
}

func file(name, body string) member { return member{name: name, mode: 0o644, body: body} }
func exe(name, body string) member  { return member{name: name, mode: 0o755, body: body} }
func dir(name string) member        { return member{name: name, mode: fs.ModeDir | 0o755} }
func sym(name, target string) member {
	return member{name: name, mode: fs.ModeSymlink | 0o777, link: target}
}
func hard(name, target string) member {
	return member{name: name, mode: 0o644, link: target, hard: true}
}
func special(name string, mode fs.FileMode) member {
	return member{name: name, mode: mode | 0o644}
}

func tarOf(t testing.TB, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	writeTar(t, &buf, ms)
	return buf.Bytes()
}

func tgzOf(t testing.TB, ms ...member) []byte {
	t.Helper()
	return gzipOf(t, tarOf(t, ms...))
}

func gzipOf(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	if _, err := gz.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTar(t testing.TB, w io.Writer, ms []member) {
	t.Helper()
	tw := tar.NewWriter(w)
	for _, m := range ms {
		hdr := tarHeader(m)
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatalf("tar header %q: %v", m.name, err)
		}
		if _, err := io.WriteString(tw, m.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func tarHeader(m member) *tar.Header {
	hdr := &tar.Header{Name: m.name, Mode: int64(m.mode.Perm()), Linkname: m.link, Format: tar.FormatPAX}
	if m.mode&fs.ModeSetuid != 0 {
		hdr.Mode |= 0o4000
	}
	if m.mode&fs.ModeSetgid != 0 {
		hdr.Mode |= 0o2000
	}
	if m.mode&fs.ModeSticky != 0 {
		hdr.Mode |= 0o1000
	}
	switch {
	case m.hard:
		hdr.Typeflag = tar.TypeLink
	case m.mode&fs.ModeDir != 0:
		hdr.Typeflag = tar.TypeDir
	case m.mode&fs.ModeSymlink != 0:
		hdr.Typeflag = tar.TypeSymlink
	case m.mode&fs.ModeCharDevice != 0:
		hdr.Typeflag = tar.TypeChar
	case m.mode&fs.ModeDevice != 0:
		hdr.Typeflag = tar.TypeBlock
	case m.mode&fs.ModeNamedPipe != 0:
		hdr.Typeflag = tar.TypeFifo
	default:
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(m.body))
	}
	return hdr
}

// zipOf builds a zip; a symbolic link's target is its content, as Info-ZIP
// stores it.
func zipOf(t testing.TB, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		hdr := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
		hdr.SetMode(m.mode)
		w, err := zw.CreateHeader(hdr)
		if err != nil {
			t.Fatalf("zip header %q: %v", m.name, err)
		}
		body := m.body
		if m.mode&fs.ModeSymlink != 0 {
			body = m.link
		}
		if _, err := io.WriteString(w, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zerosTgz is a gzipped tar of one file of n zero bytes, streamed so
// that the test never holds n bytes.
func zerosTgz(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: n}); err != nil {
		t.Fatal(err)
	}
	writeZeros(t, tw, n)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// zerosZip is a zip of one deflated file of n zero bytes.
func zerosZip(t testing.TB, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "zeros", Method: zip.Deflate})
	if err != nil {
		t.Fatal(err)
	}
	writeZeros(t, w, n)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeZeros(t testing.TB, w io.Writer, n int64) {
	t.Helper()
	if _, err := io.CopyN(w, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
