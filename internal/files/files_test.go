package files

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func encoded(t testing.TB, format string, w, h int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var b bytes.Buffer
	var err error
	switch format {
	case PNG:
		err = png.Encode(&b, img)
	case JPEG:
		err = jpeg.Encode(&b, img, nil)
	case GIF:
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webp builds a RIFF/WEBP file whose one chunk is typ with body.
func webp(typ string, body []byte) []byte {
	chunk := append([]byte(typ), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...)
	chunk = append(chunk, body...)
	if len(body)%2 == 1 {
		chunk = append(chunk, 0)
	}
	out := append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(4+len(chunk)))...)
	out = append(out, "WEBP"...)
	return append(out, chunk...)
}

// A real 1x1 lossless WebP, as libwebp writes it.
var tinyWebP = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")

func lossyWebP(w, h int) []byte {
	body := []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a}
	body = binary.LittleEndian.AppendUint16(body, uint16(w))
	body = binary.LittleEndian.AppendUint16(body, uint16(h))
	return webp("VP8 ", append(body, make([]byte, 8)...))
}

func extendedWebP(w, h int) []byte {
	body := []byte{0, 0, 0, 0}
	w, h = w-1, h-1
	body = append(body, byte(w), byte(w>>8), byte(w>>16), byte(h), byte(h>>8), byte(h>>16))
	return webp("VP8X", body)
}

func TestCheckAcceptsEachType(t *testing.T) {
	cases := []struct {
		name     string
		data     []byte
		declared string
		want     Info
	}{
		{"png", encoded(t, PNG, 3, 2), PNG, Info{PNG, 3, 2}},
		{"png undeclared", encoded(t, PNG, 3, 2), "", Info{PNG, 3, 2}},
		{"png with parameters", encoded(t, PNG, 3, 2), "Image/PNG; charset=binary", Info{PNG, 3, 2}},
		{"jpeg", encoded(t, JPEG, 5, 4), JPEG, Info{JPEG, 5, 4}},
		{"jpg alias", encoded(t, JPEG, 5, 4), "image/jpg", Info{JPEG, 5, 4}},
		{"gif", encoded(t, GIF, 7, 6), GIF, Info{GIF, 7, 6}},
		{"webp lossless", tinyWebP, WebP, Info{WebP, 1, 1}},
		{"webp lossy", lossyWebP(640, 480), WebP, Info{WebP, 640, 480}},
		{"webp extended", extendedWebP(1000, 20), WebP, Info{WebP, 1000, 20}},
	}
	for _, c := range cases {
		got, err := Check(c.data, c.declared)
		if err != nil || got != c.want {
			t.Errorf("%s: Check = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestCheckRejects(t *testing.T) {
	pngBytes := encoded(t, PNG, 3, 2)
	garbage := append(append([]byte{}, pngBytes[:33]...), bytes.Repeat([]byte("garbage!"), 20)...)
	badCRC := append([]byte{}, pngBytes...)
	badCRC[len(badCRC)-20] ^= 0xff
	cases := []struct {
		name     string
		data     []byte
		declared string
		reason   string
	}{
		{"text", []byte("hello, world"), "", "not a PNG, JPEG, GIF or WebP image, nor a tar, gzipped tar or zip"},
		{"text declared png", []byte("hello, world"), PNG, "not a PNG, JPEG, GIF or WebP"},
		{"empty", nil, PNG, "empty"},
		{"svg", []byte("<svg/>"), "image/svg+xml", `media type "image/svg+xml" is not accepted`},
		{"pdf type", pngBytes, "application/pdf", "is not accepted"},
		{"bad type", pngBytes, ";;", "is not accepted"},
		{"jpeg declared png", encoded(t, JPEG, 2, 2), PNG, "declared as image/png but its bytes are image/jpeg"},
		{"png header on garbage", append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...), PNG, "begins like a image/png image but is not one"},
		{"png header and IHDR on garbage", garbage, PNG, "is not one"},
		{"png with a bad checksum", badCRC, PNG, "bad checksum"},
		{"truncated png", pngBytes[:len(pngBytes)-12], PNG, "before IEND"},
		{"jpeg magic on garbage", append([]byte{0xff, 0xd8, 0xff}, bytes.Repeat([]byte{1}, 50)...), JPEG, "is not one"},
		{"gif magic on garbage", []byte("GIF89a"), GIF, "is not one"},
		{"webp too short", []byte("RIFF\x00\x00\x00\x00WEBP"), WebP, "shorter than a WebP header"},
		{"webp unknown chunk", webp("ABCD", make([]byte, 20)), WebP, `first chunk is "ABCD"`},
		{"webp bad riff size", append(append([]byte{}, tinyWebP[:4]...), append([]byte{0xff, 0xff, 0, 0}, tinyWebP[8:]...)...), WebP, "RIFF size"},
		{"webp lossy no start code", webp("VP8 ", make([]byte, 20)), WebP, "no start code"},
		{"webp lossless no signature", webp("VP8L", make([]byte, 20)), WebP, "no signature"},
		{"too wide", extendedWebP(MaxSide+1, 1), WebP, "each side must be from 1"},
		{"zero pixels", lossyWebP(0, 10), WebP, "each side must be from 1"},
	}
	for _, c := range cases {
		_, err := Check(c.data, c.declared)
		if err == nil || !IsError(err) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Check = %v; want an *Error saying %q", c.name, err, c.reason)
		}
	}
}

func TestSniff(t *testing.T) {
	for data, want := range map[string]string{
		"\x89PNG\r\n\x1a\nxx": PNG, "\xff\xd8\xff\xe0": JPEG, "GIF87a": GIF, "GIF89a..": GIF,
		string(tinyWebP): WebP, "RIFF1234WAVE": "", "": "", "\x89PNG": "", "%PDF-1.7": "",
	} {
		if got := Sniff([]byte(data)); got != want {
			t.Errorf("Sniff(%q) = %q, want %q", data, got, want)
		}
	}
}

// FuzzCheck: no input panics, and what is accepted is what the bytes say,
// within bounds.
func FuzzCheck(f *testing.F) {
	f.Add(encoded(f, PNG, 2, 2), PNG)
	f.Add(encoded(f, JPEG, 2, 2), "")
	f.Add(encoded(f, GIF, 2, 2), GIF)
	f.Add(tinyWebP, WebP)
	f.Add(lossyWebP(10, 10), "")
	f.Add(extendedWebP(10, 10), "image/webp; q=1")
	f.Add([]byte("\x89PNG\r\n\x1a\n"), "")
	f.Add([]byte("RIFF\xff\xff\xff\xffWEBPVP8X"), WebP)
	ustar := tarOf(f, tar.FormatUSTAR)
	f.Add(ustar, Tar)
	f.Add(tarOf(f, tar.FormatUnknown), "")
	f.Add(gzipOf(f, ustar), "application/x-gzip")
	f.Add(gzipOf(f, []byte("not a tar")), Gzip)
	f.Add(zipOf(f, "a/b.txt"), Zip)
	f.Add(zipOf(f), "")
	f.Add([]byte("PK\x03\x04"), Zip)
	f.Fuzz(func(t *testing.T, data []byte, declared string) {
		info, err := Check(data, declared)
		if err != nil {
			if !IsError(err) {
				t.Fatalf("Check error %v is not an *Error", err)
			}
			return
		}
		if info.MediaType != Sniff(data) || !Accepted(info.MediaType) {
			t.Fatalf("accepted as %q, sniffed %q", info.MediaType, Sniff(data))
		}
		if KindOf(info.MediaType) == KindArchive {
			if info.Width != 0 || info.Height != 0 {
				t.Fatalf("an archive accepted as %dx%d pixels", info.Width, info.Height)
			}
			return
		}
		if info.Width < 1 || info.Height < 1 || info.Width > MaxSide || info.Height > MaxSide {
			t.Fatalf("accepted %dx%d", info.Width, info.Height)
		}
	})
}
