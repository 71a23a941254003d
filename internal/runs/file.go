package runs

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// File is an uploaded image, kept in the store for every replica until it
// expires or is deleted. It belongs to the tenant that uploaded it.
type File struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant,omitempty"`
	MediaType string    `json:"media_type"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	Name      string    `json:"name,omitempty"`
	Width     int       `json:"width"`
	Height    int       `json:"height"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Defaults of FileLimits.
const (
	DefaultFileTTL           = 24 * time.Hour
	DefaultMaxFileBytes      = 5 << 20
	DefaultMaxFilesPerTenant = 1000
	// MaxAttachments bounds the attachments of one prompt or message.
	MaxAttachments = 8
	// MaxFileNameBytes bounds a file's name.
	MaxFileNameBytes = 255
)

// The codes of a FileError.
const (
	// FileNotFound: an attachment names a file the tenant does not have
	// (none, another tenant's, expired or deleted).
	FileNotFound = "file_not_found"
	// FileTooLarge: a file is larger than FileLimits.MaxBytes.
	FileTooLarge = "file_too_large"
	// InvalidAttachment: the bytes are not an accepted image, or not the
	// image they are declared as.
	InvalidAttachment = "invalid_attachment"
	// TooManyFiles: the tenant keeps FileLimits.MaxPerTenant files.
	TooManyFiles = "too_many_files"
)

// FileError is an uploaded or attached file refused: a code (FileNotFound,
// FileTooLarge, InvalidAttachment, TooManyFiles), the request field at
// fault, and why.
type FileError struct {
	Code   string
	Field  string
	Reason string
}

func (e *FileError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("field %q: %s", e.Field, e.Reason)
	}
	return e.Reason
}

// fileIDPrefix begins every file id, so that one is never taken for a
// run's.
const fileIDPrefix = "file-"

// ValidFileID reports whether id has the shape of a file id: the prefix
// and a UUID in canonical form.
func ValidFileID(id string) bool {
	rest, ok := strings.CutPrefix(id, fileIDPrefix)
	if !ok {
		return false
	}
	u, err := uuid.Parse(rest)
	return err == nil && u.String() == rest
}

// FileID is the id of a file whose unique part is unique.
func FileID(unique string) string { return fileIDPrefix + unique }
