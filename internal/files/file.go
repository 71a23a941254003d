package files

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// File is an uploaded image or archive, kept in the store for every
// replica until it expires or is deleted. It belongs to the tenant that
// uploaded it. Kind says which (KindImage, KindArchive); only an image has
// a width and a height.
type File struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant,omitempty"`
	Kind      string    `json:"kind"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	Name      string    `json:"name,omitempty"`
	Width     int       `json:"width,omitempty"`
	Height    int       `json:"height,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Defaults of Limits, and the bounds of what a request attaches.
const (
	DefaultTTL          = 24 * time.Hour
	DefaultMaxBytes     = 5 << 20
	DefaultMaxArchive   = 100 << 20
	DefaultMaxPerTenant = 1000
	// MaxAttachments bounds the attachments of one prompt or message.
	MaxAttachments = 8
	// MaxNameBytes bounds a file's name.
	MaxNameBytes = 255
)

// Limits bound uploaded files and inline attachments. A zero field takes
// its default.
type Limits struct {
	// TTL is how long an uploaded file is kept (AGENTGATE_FILE_TTL,
	// default 24 h). The store's bucket expires files after the same.
	TTL time.Duration
	// MaxBytes bounds one image, uploaded or inline
	// (AGENTGATE_MAX_FILE_BYTES, default 5 MiB).
	MaxBytes int64
	// MaxArchiveBytes bounds one uploaded archive
	// (AGENTGATE_MAX_ARCHIVE_BYTES, default 100 MiB): a repository's tree
	// is larger than an image.
	MaxArchiveBytes int64
	// MaxPerTenant bounds the files a tenant keeps at once
	// (AGENTGATE_MAX_FILES_PER_TENANT, default 1000).
	MaxPerTenant int
}

func (l Limits) withDefaults() Limits {
	if l.TTL <= 0 {
		l.TTL = DefaultTTL
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxArchiveBytes <= 0 {
		l.MaxArchiveBytes = DefaultMaxArchive
	}
	if l.MaxPerTenant <= 0 {
		l.MaxPerTenant = DefaultMaxPerTenant
	}
	return l
}

// maxBytes is the bound of a file of kind.
func (l Limits) maxBytes(kind string) int64 {
	if kind == KindArchive {
		return l.MaxArchiveBytes
	}
	return l.MaxBytes
}

// The codes of a Refusal.
const (
	// NotFound: an attachment or a workspace names a file the tenant
	// does not have (none, another tenant's, expired or deleted).
	NotFound = "file_not_found"
	// TooLarge: an image is larger than Limits.MaxBytes, an archive than
	// Limits.MaxArchiveBytes.
	TooLarge = "file_too_large"
	// InvalidAttachment: the bytes are not an accepted image or archive,
	// or not the one they are declared as; or an attachment is an
	// archive, not an image.
	InvalidAttachment = "invalid_attachment"
	// TooManyFiles: the tenant keeps Limits.MaxPerTenant files.
	TooManyFiles = "too_many_files"
	// NotAnArchive: a workspace names a file that is an image, not an
	// archive.
	NotAnArchive = "not_an_archive"
)

// ArchiveField is the request field that names the archive a run's
// workspace is unpacked from.
const ArchiveField = "workspace.archive"

// Refusal is an uploaded or attached file refused: a code (NotFound,
// TooLarge, InvalidAttachment, TooManyFiles, NotAnArchive), the request
// field at fault, and why. Unlike an *Error, which only judges bytes, it is what the
// sender of a request is told.
type Refusal struct {
	Code   string
	Field  string
	Reason string
}

func (e *Refusal) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
	}
	return e.Reason
}

// idPrefix begins every file id, so that one is never taken for a run's.
const idPrefix = "file-"

// ValidID reports whether id has the shape of a file id: the prefix and a
// UUID in canonical form. Nothing else may name a file, in the store or on
// disk.
func ValidID(id string) bool {
	rest, ok := strings.CutPrefix(id, idPrefix)
	if !ok {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// newID returns a fresh file id; version 7, so that ids sort by creation.
func newID() (string, error) {
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new file id: %w", err)
	}
	return idPrefix + u.String(), nil
}

// checkName accepts a name to show, not a path: printable, bounded,
// without slashes.
func checkName(name string) error {
	if len(name) > MaxNameBytes {
		return fmt.Errorf("must be at most %d bytes", MaxNameBytes)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == 0xfffd {
			return errors.New("must be printable UTF-8 without slashes")
		}
	}
	return nil
}
