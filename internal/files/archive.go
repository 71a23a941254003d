package files

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// The media types of an archive a run's workspace may be unpacked from.
// Gzip is a gzipped tar: a file that only gzips something else is not
// accepted.
const (
	Tar  = "application/x-tar"
	Gzip = "application/gzip"
	Zip  = "application/zip"
)

// ArchiveTypes are the accepted media types of archives, in the order
// messages list them.
var ArchiveTypes = []string{Tar, Gzip, Zip}

// The kinds of a file: what it may be used for.
const (
	// KindImage: an attachment of a prompt or a message.
	KindImage = "image"
	// KindArchive: a tar, gzipped tar or zip a run's workspace is
	// unpacked from.
	KindArchive = "archive"
)

// KindOf returns the kind of an accepted media type (normalised), or ""
// for any other.
func KindOf(mt string) string {
	for _, t := range Types {
		if t == mt {
			return KindImage
		}
	}
	for _, t := range ArchiveTypes {
		if t == mt {
			return KindArchive
		}
	}
	return ""
}

// archiveAliases are the other names clients give the archive types.
var archiveAliases = map[string]string{
	"application/x-gzip":           Gzip,
	"application/x-compressed-tar": Gzip,
	"application/x-zip-compressed": Zip, // what browsers on Windows send
}

// tarBlock is the size of a tar header.
const tarBlock = 512

// sniffArchive returns the archive type that data's magic numbers name,
// or "". A tar has a magic number only since POSIX ustar: an older one is
// told by its header's checksum.
func sniffArchive(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0x1f, 0x8b}):
		return Gzip
	case bytes.HasPrefix(data, []byte("PK\x03\x04")), bytes.HasPrefix(data, []byte("PK\x05\x06")):
		return Zip
	case len(data) >= tarBlock && (string(data[257:262]) == "ustar" || tarChecksumOK(data[:tarBlock])):
		return Tar
	}
	return ""
}

// checkArchive checks that data, sniffed as the archive type mt, is one
// as far as its first header: what unpacking it finds further is
// internal/unpack's to judge. Nothing here decompresses more than one tar
// header.
func checkArchive(mt string, data []byte) error {
	switch mt {
	case Tar:
		if !tarChecksumOK(data[:tarBlock]) {
			return errors.New("its first header's checksum does not match")
		}
	case Gzip:
		return checkGzippedTar(data)
	case Zip:
		_, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
			// A path that leaves the directory is refused when the
			// archive is unpacked, where it is named.
			return err
		}
	}
	return nil
}

// checkGzippedTar decompresses the first tar header of a gzip stream.
func checkGzippedTar(data []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer zr.Close()
	head := make([]byte, tarBlock)
	if _, err := io.ReadFull(zr, head); err != nil {
		return fmt.Errorf("it does not decompress to a tar header: %w", err)
	}
	if !tarChecksumOK(head) {
		return errors.New("it does not hold a tar archive (its first 512 bytes are no tar header)")
	}
	return nil
}

// tarChecksumOK reports whether a 512-byte block is a tar header: its
// checksum field, octal, is the sum of its bytes with the field taken as
// spaces; unsigned, or signed as some old tars summed. A block of zeros,
// the end of an archive, has no checksum and is none.
func tarChecksumOK(block []byte) bool {
	want, ok := parseOctal(block[148:156])
	if !ok {
		return false
	}
	var unsigned, signed int64
	for i, c := range block {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return want == unsigned || want == signed
}

// parseOctal reads a tar numeric field: octal digits between optional
// leading spaces and trailing spaces or NULs.
func parseOctal(field []byte) (int64, bool) {
	field = bytes.TrimLeft(field, " ")
	field = bytes.TrimRight(field, " \x00")
	if len(field) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range field {
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n<<3 | int64(c-'0')
	}
	return n, true
}
