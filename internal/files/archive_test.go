package files

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgate/agentgate/internal/runs"
)

// tarOf returns a tar of one file, in format (ustar or the old V7, which
// has no magic number).
func tarOf(t testing.TB, format tar.Format) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	body := []byte("package main\n")
	hdr := &tar.Header{Name: "main.go", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg, Format: format}
	if format == tar.FormatUnknown {
		hdr.Format = tar.FormatUSTAR
	}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	tw.Write(body)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	out := b.Bytes()
	if format == tar.FormatUnknown {
		// V7: no magic, version, names of owners or prefix; the checksum
		// summed again.
		clear(out[257:tarBlock])
		fixTarChecksum(out[:tarBlock])
	}
	return out
}

// fixTarChecksum sets a header's checksum as tar writes it.
func fixTarChecksum(block []byte) {
	copy(block[148:156], "        ")
	var sum int64
	for _, c := range block[:tarBlock] {
		sum += int64(c)
	}
	copy(block[148:156], fmt.Sprintf("%06o\x00 ", sum))
}

func gzipOf(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zipOf returns a zip of the named files; none makes an empty zip.
func zipOf(t testing.TB, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("x"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckAcceptsArchives(t *testing.T) {
	ustar, v7 := tarOf(t, tar.FormatUSTAR), tarOf(t, tar.FormatUnknown)
	if string(v7[257:262]) == "ustar" {
		t.Fatal("the V7 tar has a ustar magic number")
	}
	tgz, zipped := gzipOf(t, ustar), zipOf(t, "a/b.go", "c.txt")
	cases := []struct {
		name     string
		data     []byte
		declared string
		want     string
	}{
		{"ustar tar", ustar, Tar, Tar},
		{"pax tar", tarOf(t, tar.FormatPAX), "", Tar},
		{"gnu tar", tarOf(t, tar.FormatGNU), "", Tar},
		{"v7 tar, told by its checksum", v7, "", Tar},
		{"tar.gz", tgz, Gzip, Gzip},
		{"tar.gz as x-gzip", tgz, "application/x-gzip", Gzip},
		{"tar.gz as x-compressed-tar", tgz, "application/x-compressed-tar", Gzip},
		{"tar.gz undeclared", tgz, "application/GZIP; x=1", Gzip},
		{"zip", zipped, Zip, Zip},
		{"zip from a browser on Windows", zipped, "application/x-zip-compressed", Zip},
		{"empty zip", zipOf(t), "", Zip},
		{"zip with a path out", zipOf(t, "../evil"), Zip, Zip},
	}
	for _, c := range cases {
		got, err := Check(c.data, c.declared)
		if err != nil || got != (Info{MediaType: c.want}) || KindOf(got.MediaType) != KindArchive {
			t.Errorf("%s: Check = %+v, %v; want %s, an archive", c.name, got, err, c.want)
		}
	}
}

func TestCheckRejectsArchives(t *testing.T) {
	ustar := tarOf(t, tar.FormatUSTAR)
	badSum := bytes.Clone(ustar)
	badSum[0] ^= 1
	zipped := zipOf(t, "a.txt")
	cases := []struct {
		name     string
		data     []byte
		declared string
		reason   string
	}{
		{"zip declared tar", zipped, Tar, "declared as application/x-tar but its bytes are application/zip"},
		{"tar declared zip", ustar, Zip, "declared as application/zip but its bytes are application/x-tar"},
		{"png declared zip", encoded(t, PNG, 1, 1), Zip, "its bytes are image/png"},
		{"tar declared png", ustar, PNG, "declared as image/png but its bytes are application/x-tar"},
		{"ustar with a bad checksum", badSum, "", "checksum does not match"},
		{"empty tar", make([]byte, 1024), "", "match none of them"},
		{"short tar", ustar[:300], "", "match none of them"},
		{"gzip of text", gzipOf(t, bytes.Repeat([]byte("hello "), 200)), Gzip, "does not hold a tar archive"},
		{"gzip of little", gzipOf(t, []byte("hi")), "", "does not decompress to a tar header"},
		{"gzip magic on garbage", append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte{9}, 40)...), "", "begins like a application/gzip archive"},
		{"truncated tar.gz", gzipOf(t, ustar)[:30], "", "is not one"},
		{"zip magic on garbage", append([]byte("PK\x03\x04"), bytes.Repeat([]byte{0}, 100)...), "", "begins like a application/zip archive"},
		{"truncated zip", zipped[:len(zipped)-10], Zip, "is not one"},
		{"rar", []byte("Rar!\x1a\x07\x00......"), "application/vnd.rar", "is not accepted"},
	}
	for _, c := range cases {
		_, err := Check(c.data, c.declared)
		if err == nil || !IsError(err) || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: Check = %v; want an *Error saying %q", c.name, err, c.reason)
		}
	}
}

func TestSniffArchives(t *testing.T) {
	ustar := tarOf(t, tar.FormatUSTAR)
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"tar":              {ustar, Tar},
		"v7 tar":           {tarOf(t, tar.FormatUnknown), Tar},
		"gzip":             {[]byte{0x1f, 0x8b, 8}, Gzip},
		"zip":              {[]byte("PK\x03\x04"), Zip},
		"empty zip":        {[]byte("PK\x05\x06"), Zip},
		"spanned zip":      {[]byte("PK\x07\x08"), ""},
		"zeros":            {make([]byte, 1024), ""},
		"text of 512":      {bytes.Repeat([]byte("a"), 512), ""},
		"ustar magic only": {append(make([]byte, 257), "ustar"...), ""},
	} {
		if got := Sniff(c.data); got != c.want {
			t.Errorf("Sniff(%s) = %q, want %q", name, got, c.want)
		}
	}
}

// Archives are uploaded, bounded apart from images; an attachment is an
// image, and a workspace an archive.
func TestUploadsKeepArchives(t *testing.T) {
	ctx := context.Background()
	up := NewUploads(newMemStore(), Limits{MaxBytes: 1024, MaxArchiveBytes: 8192}, nil)
	tgz := gzipOf(t, tarOf(t, tar.FormatUSTAR))
	a, err := up.Upload(ctx, "acme", "repo.tgz", "application/x-gzip", tgz)
	if err != nil || a.Kind != KindArchive || a.MediaType != Gzip || a.Width != 0 || a.Name != "repo.tgz" {
		t.Fatalf("Upload of a tar.gz = %+v, %v", a, err)
	}
	img, err := up.Upload(ctx, "acme", "", "", encoded(t, PNG, 2, 2))
	if err != nil || img.Kind != KindImage || img.Width != 2 {
		t.Fatalf("Upload of an image = %+v, %v", img, err)
	}
	largeTar := tarOf(t, tar.FormatUSTAR)
	largeTar = append(largeTar, make([]byte, 4096)...)
	if f, err := up.Upload(ctx, "acme", "", "", largeTar); err != nil || f.Size <= 1024 {
		t.Errorf("Upload of a %d-byte tar, beyond MaxBytes, within MaxArchiveBytes = %+v, %v", len(largeTar), f, err)
	}
	for name, data := range map[string][]byte{
		"an image beyond MaxBytes":       append(encoded(t, PNG, 2, 2), make([]byte, 2048)...),
		"an archive beyond its own max":  append(bytes.Clone(largeTar), make([]byte, 8192)...),
		"an archive beyond the greatest": make([]byte, 9000),
	} {
		if _, err := up.Upload(ctx, "acme", "", "", data); refusalCode(err) != TooLarge {
			t.Errorf("Upload of %s = %v, want %s", name, err, TooLarge)
		}
	}

	if _, err := up.Create(ctx, "acme", "attachments[0]", "", "", tgz); refusalCode(err) != InvalidAttachment || !strings.Contains(err.Error(), "not an image") {
		t.Errorf("an inline archive attached = %v, want %s saying it is not an image", err, InvalidAttachment)
	}
	if _, err := up.Attachment(ctx, "acme", "attachments[1]", a.ID); refusalCode(err) != InvalidAttachment || !strings.Contains(err.Error(), `"attachments[1]"`) {
		t.Errorf("an uploaded archive attached = %v, want %s of attachments[1]", err, InvalidAttachment)
	}
	if f, err := up.Attachment(ctx, "acme", "attachments[0]", img.ID); err != nil || f != img {
		t.Errorf("an uploaded image attached = %+v, %v", f, err)
	}

	if f, data, err := up.Archive(ctx, "acme", a.ID); err != nil || f != a || !bytes.Equal(data, tgz) {
		t.Errorf("Archive = %+v, %d bytes, %v", f, len(data), err)
	}
	if _, _, err := up.Archive(ctx, "acme", img.ID); refusalCode(err) != NotAnArchive || !strings.Contains(err.Error(), ArchiveField) {
		t.Errorf("Archive of an image = %v, want %s of %s", err, NotAnArchive, ArchiveField)
	}
	for _, tenantID := range [][2]string{{"globex", a.ID}, {"acme", "file-nope"}} {
		if _, _, err := up.Archive(ctx, tenantID[0], tenantID[1]); refusalCode(err) != NotFound {
			t.Errorf("Archive(%s, %s) = %v, want %s", tenantID[0], tenantID[1], err, NotFound)
		}
		if _, err := up.Attachment(ctx, tenantID[0], "attachments[0]", tenantID[1]); refusalCode(err) != NotFound {
			t.Errorf("Attachment(%s, %s) = %v, want %s", tenantID[0], tenantID[1], err, NotFound)
		}
	}
}

// A file kept before files had kinds is an image.
func TestUploadsOldRecordsAreImages(t *testing.T) {
	ctx := context.Background()
	st := newMemStore()
	up := NewUploads(st, Limits{}, nil)
	f, err := up.Create(ctx, "acme", "file", "", "", encoded(t, GIF, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	old := st.files[memKey("acme", f.ID)]
	old.f.Kind = ""
	st.files[memKey("acme", f.ID)] = old
	if got, err := up.Get(ctx, "acme", f.ID); err != nil || got.Kind != KindImage {
		t.Errorf("Get of a record without a kind = %+v, %v; want an image", got, err)
	}
	if _, _, err := up.Archive(ctx, "acme", f.ID); refusalCode(err) != NotAnArchive || errors.Is(err, runs.ErrNotFound) {
		t.Errorf("Archive of an old image = %v, want %s", err, NotAnArchive)
	}
}
