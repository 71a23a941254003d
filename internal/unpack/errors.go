package unpack

import (
	"fmt"

	"github.com/agentgate/agentgate/internal/clip"
)

// Codes of an *Error: why an archive was refused.
const (
	// CodeFormat: not a tar, gzipped tar or zip, or a corrupt one.
	CodeFormat = "archive_format"
	// CodeUnsafePath: an entry's name is absolute, climbs with "..",
	// goes through a link or a file, holds control bytes, is too long,
	// or is a Windows path in a zip.
	CodeUnsafePath = "archive_unsafe_path"
	// CodeLinkOutside: a symbolic link whose target leaves the
	// directory (or loops), or a hard link to anything but a regular file
	// unpacked before it.
	CodeLinkOutside = "archive_link_outside"
	// CodeSpecialFile: a device, FIFO, socket or entry of unknown type.
	CodeSpecialFile = "archive_special_file"
	// CodeDuplicate: an entry that would replace an earlier one of
	// another kind (a file over a directory or a link, say).
	CodeDuplicate = "archive_duplicate"
	// CodeTooManyEntries: more entries than Limits.Entries.
	CodeTooManyEntries = "archive_too_many_entries"
	// CodeTooLarge: a file over Limits.FileBytes, or all of them over
	// Limits.TotalBytes.
	CodeTooLarge = "archive_too_large"
	// CodeRatio: more bytes unpacked per byte read than Limits.Ratio.
	CodeRatio = "archive_ratio"
	// CodeTooDeep: a path of more elements than Limits.Depth.
	CodeTooDeep = "archive_too_deep"
)

// nameClip is how much of an entry's name a message quotes.
const nameClip = 120

// Error is an archive refused: Code is one of the Code constants, for
// machines; Message is a sentence for a person, naming the entry
// (clipped), never quoting the archive.
type Error struct {
	Code    string
	Message string
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// entryError is a refusal of the entry name: its message is the clipped,
// quoted name followed by what is wrong with it.
func entryError(code, name, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf("entry %s: %s", quote(name), fmt.Sprintf(format, args...))}
}

// quote clips s and quotes it, so that control bytes show as escapes.
func quote(s string) string { return fmt.Sprintf("%q", clip.Text(s, nameClip)) }
