// Package files is the home of uploaded files: the images a tenant uploads,
// or sends inline with a prompt or a message, and the archives (tar,
// gzipped tar, zip) a run's workspace is unpacked from, kept for every
// replica until they expire or are deleted.
//
// Uploads creates, reads, deletes and counts a tenant's files (File) within
// their Limits, in a Store that internal/store implements; a file refused is
// a *Refusal with a code the API answers with. What a run does with its
// attachments (checking them at submission, writing them where its CLI reads
// them) is the supervisor's.
//
// Check tells the images a run may be given, and the archives it may
// start from, apart from other bytes: PNG, JPEG, GIF and WebP; tar, gzipped
// tar and zip; recognised by their bytes, whatever their sender calls them.
// A file is accepted when its magic numbers name one of these types, the
// type it was declared as (if any) is that type, and its header parses; an
// image's dimensions must be within bounds. Nothing here decodes pixels or
// unpacks: a CLI hands an image's bytes to its model as they are, and the
// header is what tells a real image or archive from bytes that merely begin
// like one.
package files

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"mime"
	"strings"
)

// The media types an attachment may have.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// Types are the accepted media types of images, in the order messages
// list them. ArchiveTypes are the archives'.
var Types = []string{PNG, JPEG, GIF, WebP}

// MaxSide bounds an image's width and height, in pixels: the models take
// far less, and a header that claims more is a decompression bomb or a
// lie.
const MaxSide = 16384

// Info is what Check found of an image or an archive (whose Width and
// Height are zero).
type Info struct {
	MediaType     string
	Width, Height int
}

// Error says why bytes are not an acceptable image or archive, in a
// sentence for the sender.
type Error struct{ Reason string }

func (e *Error) Error() string { return e.Reason }

// IsError reports whether err is a verdict on the bytes (an *Error), as
// opposed to a failure to read them.
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

func reject(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// Sniff returns the accepted media type that data's magic numbers name, or
// "" when they name none of them.
func Sniff(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		return PNG
	case bytes.HasPrefix(data, []byte{0xff, 0xd8, 0xff}):
		return JPEG
	case bytes.HasPrefix(data, []byte("GIF87a")), bytes.HasPrefix(data, []byte("GIF89a")):
		return GIF
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		return WebP
	}
	return sniffArchive(data)
}

// NormalizeType returns the media type of a declared Content-Type, lower
// case and without parameters ("image/PNG; x=y" is "image/png"), or "" when
// it does not parse. "image/jpg", which some clients send, is image/jpeg;
// the other names of gzip and zip (application/x-gzip…) are theirs.
func NormalizeType(declared string) string {
	mt, _, err := mime.ParseMediaType(declared)
	if err != nil {
		return ""
	}
	if mt == "image/jpg" || mt == "image/pjpeg" {
		return JPEG
	}
	if alias, ok := archiveAliases[mt]; ok {
		return alias
	}
	return mt
}

// Accepted reports whether mt, normalised, is one of Types or
// ArchiveTypes.
func Accepted(mt string) bool {
	return KindOf(mt) != ""
}

// Check validates data as an image or an archive declared as declared (a
// media type, or "" to take what the bytes say). The error, when not nil,
// is an *Error whose Reason says what is wrong.
func Check(data []byte, declared string) (Info, error) {
	var mt string
	if declared != "" {
		if mt = NormalizeType(declared); !Accepted(mt) {
			return Info{}, reject("media type %q is not accepted: send one of %s, %s",
				clip(declared), strings.Join(Types, ", "), strings.Join(ArchiveTypes, ", "))
		}
	}
	if len(data) == 0 {
		return Info{}, reject("the file is empty")
	}
	sniffed := Sniff(data)
	switch {
	case sniffed == "":
		return Info{}, reject("the bytes are not a PNG, JPEG, GIF or WebP image, nor a tar, gzipped tar or zip archive (their first bytes match none of them)")
	case mt != "" && sniffed != mt:
		return Info{}, reject("the file is declared as %s but its bytes are %s", mt, sniffed)
	}
	if KindOf(sniffed) == KindArchive {
		if err := checkArchive(sniffed, data); err != nil {
			return Info{}, reject("the file begins like a %s archive but is not one: %v", sniffed, err)
		}
		return Info{MediaType: sniffed}, nil
	}
	return checkImage(sniffed, data)
}

// checkImage reads the header of data, sniffed as the image type mt, and
// bounds its dimensions.
func checkImage(sniffed string, data []byte) (Info, error) {
	info := Info{MediaType: sniffed}
	var err error
	switch sniffed {
	case PNG:
		info.Width, info.Height, err = pngConfig(data)
	case JPEG:
		info.Width, info.Height, err = stdConfig(jpeg.DecodeConfig, data)
	case GIF:
		info.Width, info.Height, err = stdConfig(gif.DecodeConfig, data)
	case WebP:
		info.Width, info.Height, err = webpConfig(data)
	}
	if err != nil {
		return Info{}, reject("the file begins like a %s image but is not one: %v", sniffed, err)
	}
	if info.Width < 1 || info.Height < 1 || info.Width > MaxSide || info.Height > MaxSide {
		return Info{}, reject("the image is %dx%d pixels; each side must be from 1 to %d", info.Width, info.Height, MaxSide)
	}
	return info, nil
}

func stdConfig(decode func(io.Reader) (image.Config, error), data []byte) (int, int, error) {
	c, err := decode(bytes.NewReader(data))
	if err != nil {
		return 0, 0, err
	}
	return c.Width, c.Height, nil
}

// pngConfig reads the PNG's header, then walks its chunks to IEND checking
// each one's length and CRC: a PNG signature and header on anything else
// fail here, not at the model.
func pngConfig(data []byte) (int, int, error) {
	c, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return 0, 0, err
	}
	rest := data[8:]
	for {
		if len(rest) < 12 {
			return 0, 0, errors.New("the chunks end before IEND")
		}
		n := binary.BigEndian.Uint32(rest[:4])
		if uint64(n) > uint64(len(rest)-12) {
			return 0, 0, errors.New("a chunk is longer than the file")
		}
		typ, body := rest[4:8], rest[8:8+n]
		crc := binary.BigEndian.Uint32(rest[8+n : 12+n])
		h := crc32.NewIEEE()
		h.Write(typ)
		h.Write(body)
		if h.Sum32() != crc {
			return 0, 0, fmt.Errorf("chunk %q has a bad checksum", clip(string(typ)))
		}
		rest = rest[12+n:]
		if string(typ) == "IEND" {
			return c.Width, c.Height, nil
		}
	}
}

// webpConfig parses a WebP's RIFF header and the first chunk's frame
// header: VP8 (lossy), VP8L (lossless) or VP8X (extended).
func webpConfig(data []byte) (int, int, error) {
	if len(data) < 30 {
		return 0, 0, errors.New("the file is shorter than a WebP header")
	}
	riff := binary.LittleEndian.Uint32(data[4:8])
	if riff < 4+8+10 || uint64(riff)+8 > uint64(len(data)) {
		return 0, 0, fmt.Errorf("the RIFF size %d does not fit the file's %d bytes", riff, len(data))
	}
	chunk := string(data[12:16])
	size := binary.LittleEndian.Uint32(data[16:20])
	if uint64(size) > uint64(riff)-12 {
		return 0, 0, fmt.Errorf("the %s chunk is longer than the file", chunk)
	}
	b := data[20:]
	switch chunk {
	case "VP8 ":
		// A key frame: a 3-byte frame tag, the start code, then 14-bit
		// width and height (RFC 6386, 9.1).
		if size < 10 || b[0]&1 != 0 {
			return 0, 0, errors.New("the VP8 chunk does not begin with a key frame")
		}
		if b[3] != 0x9d || b[4] != 0x01 || b[5] != 0x2a {
			return 0, 0, errors.New("the VP8 frame has no start code")
		}
		w := int(binary.LittleEndian.Uint16(b[6:8]) & 0x3fff)
		h := int(binary.LittleEndian.Uint16(b[8:10]) & 0x3fff)
		return w, h, nil
	case "VP8L":
		// A signature byte, then 14-bit width-1 and height-1.
		if size < 5 || b[0] != 0x2f {
			return 0, 0, errors.New("the VP8L chunk has no signature")
		}
		bits := binary.LittleEndian.Uint32(b[1:5])
		if bits>>29 != 0 {
			return 0, 0, errors.New("the VP8L header has an unknown version")
		}
		return int(bits&0x3fff) + 1, int(bits>>14&0x3fff) + 1, nil
	case "VP8X":
		// Flags and reserved bytes, then 24-bit canvas width-1 and
		// height-1.
		if size < 10 {
			return 0, 0, errors.New("the VP8X chunk is too short")
		}
		w := int(b[4]) | int(b[5])<<8 | int(b[6])<<16
		h := int(b[7]) | int(b[8])<<8 | int(b[9])<<16
		return w + 1, h + 1, nil
	}
	return 0, 0, fmt.Errorf("the first chunk is %q, not VP8, VP8L or VP8X", clip(chunk))
}

// clip bounds a value quoted back to the sender, and keeps it printable.
func clip(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i >= 64 {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			b.WriteByte('?')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
