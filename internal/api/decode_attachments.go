package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// Members of one attachment.
const (
	attFileID    = "file_id"
	attMediaType = "media_type"
	attData      = "data"
	attName      = "name"
)

var attachmentMembers = []string{attFileID, attMediaType, attData, attName}

// decodeAttachments parses the attachments of a run request or a message,
// named field: nil when absent. Each is {"file_id"} (and an optional
// "name"), or an inline image, {"data": base64, "media_type", "name"},
// whose media type may be left for the bytes to say. What the bytes are
// is checked when the run or message is submitted.
func decodeAttachments(field string, raw json.RawMessage) ([]runs.Attachment, error) {
	if raw == nil {
		return nil, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, invalidField(field, `must be an array of {"file_id": …} or {"media_type": …, "data": base64}`)
	}
	if len(items) > files.MaxAttachments {
		return nil, invalidField(field, fmt.Sprintf("must have at most %d attachments", files.MaxAttachments))
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]runs.Attachment, len(items))
	for i, item := range items {
		at := fmt.Sprintf("%s[%d]", field, i)
		a, err := decodeAttachment(at, item)
		if err != nil {
			return nil, err
		}
		out[i] = a
	}
	return out, nil
}

func decodeAttachment(at string, raw json.RawMessage) (runs.Attachment, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 || raw[0] != '{' {
		return runs.Attachment{}, invalidField(at, `must be an object: {"file_id": …} or {"media_type": …, "data": base64}`)
	}
	ms, err := readObject(raw)
	if err != nil {
		return runs.Attachment{}, invalidField(at, "is not a valid JSON object")
	}
	f := make(fields, len(ms))
	for _, m := range ms {
		if !containsStr(attachmentMembers, m.name) {
			msg := fmt.Sprintf("field %q: unknown member %s", at, quote(m.name))
			if c := closest(m.name, attachmentMembers); c != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", c)
			}
			return runs.Attachment{}, edgeErr(http.StatusBadRequest, CodeUnknownField, at+"."+echoed(m.name), msg)
		}
		if _, dup := f[m.name]; dup {
			return runs.Attachment{}, invalidField(at+"."+m.name, "appears more than once")
		}
		f[m.name] = m.raw
	}
	var a runs.Attachment
	var ok bool
	if a.Name, _, err = f.str(attName); err != nil {
		return runs.Attachment{}, invalidField(at+"."+attName, "must be a string")
	}
	if len(a.Name) > files.MaxNameBytes {
		return runs.Attachment{}, invalidField(at+"."+attName, fmt.Sprintf("must be at most %d bytes", files.MaxNameBytes))
	}
	if a.FileID, ok, err = f.str(attFileID); err != nil {
		return runs.Attachment{}, invalidField(at+"."+attFileID, "must be a string")
	}
	data, hasData, err := f.str(attData)
	if err != nil {
		return runs.Attachment{}, invalidField(at+"."+attData, "must be a base64 string")
	}
	switch {
	case ok && hasData:
		return runs.Attachment{}, invalidField(at, `has both "file_id" and "data": give one`)
	case ok:
		if !files.ValidID(a.FileID) {
			return runs.Attachment{}, edgeErr(http.StatusBadRequest, CodeAttachmentFileNotFound, at+"."+attFileID,
				fmt.Sprintf("field %q: %s is not a file id (file-…, as POST /v1/files answers)", at+"."+attFileID, quote(a.FileID)))
		}
		if f.get(attMediaType) != nil {
			return runs.Attachment{}, invalidField(at+"."+attMediaType, "is the uploaded file's own; leave it out with file_id")
		}
		return a, nil
	case !hasData:
		return runs.Attachment{}, invalidField(at, `needs "file_id" or "data"`)
	}
	if a.MediaType, _, err = f.str(attMediaType); err != nil {
		return runs.Attachment{}, invalidField(at+"."+attMediaType, "must be a string")
	}
	if len(a.MediaType) > 255 {
		return runs.Attachment{}, invalidField(at+"."+attMediaType, "must be at most 255 bytes")
	}
	if a.Data, err = decodeBase64(data); err != nil {
		return runs.Attachment{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, at+"."+attData,
			fmt.Sprintf("field %q: is not base64: %s", at+"."+attData, echoed(err.Error())))
	}
	if len(a.Data) == 0 {
		return runs.Attachment{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, at+"."+attData,
			fmt.Sprintf("field %q: is empty", at+"."+attData))
	}
	a.Size = int64(len(a.Data))
	sum := sha256.Sum256(a.Data)
	a.SHA256 = hex.EncodeToString(sum[:])
	return a, nil
}

// decodeBase64 takes standard base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	return base64.RawStdEncoding.DecodeString(s)
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
