package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// FileService is what the file routes need of the service: the files are
// the caller's tenant's, as runs.ActorFrom(ctx) names it.
type FileService interface {
	// UploadFile checks data as an image or an archive declared as
	// mediaType ("" to take what the bytes say) and stores it. Errors: a
	// *files.Refusal.
	UploadFile(ctx context.Context, name, mediaType string, data []byte) (files.File, error)
	// GetFile returns a file, or an error wrapping runs.ErrNotFound.
	GetFile(ctx context.Context, id string) (files.File, error)
	// FileContent returns a file and its bytes.
	FileContent(ctx context.Context, id string) (files.File, []byte, error)
	// DeleteFile removes a file.
	DeleteFile(ctx context.Context, id string) error
}

// Error codes of files and attachments.
const (
	// CodeAttachmentFileNotFound: an attachment names a file the tenant
	// does not have (400; "field" says which attachment).
	CodeAttachmentFileNotFound = files.NotFound
	// CodeFileTooLarge: an uploaded or inline image is larger than
	// AGENTGATE_MAX_FILE_BYTES, an uploaded archive than
	// AGENTGATE_MAX_ARCHIVE_BYTES, or a request's inline attachments than
	// AGENTGATE_MAX_INLINE_ATTACHMENT_BYTES (413).
	CodeFileTooLarge = files.TooLarge
	// CodeInvalidAttachment: the bytes are not a PNG, JPEG, GIF or WebP
	// image or a tar, tar.gz or zip archive, or not the one they are
	// declared as; or an attachment is an archive (400).
	CodeInvalidAttachment = files.InvalidAttachment
	// CodeTooManyFiles: the tenant keeps AGENTGATE_MAX_FILES_PER_TENANT
	// files (429).
	CodeTooManyFiles = files.TooManyFiles
	// CodeNotAnArchive: a run's workspace.archive names an image (400).
	CodeNotAnArchive = files.NotAnArchive
)

// Defaults of the file limits of Config.
const (
	DefaultMaxFileBytes             = files.DefaultMaxBytes
	DefaultMaxArchiveBytes          = files.DefaultMaxArchive
	DefaultMaxInlineAttachmentBytes = files.DefaultMaxBytes
)

func (s *server) maxFileBytes() int64 {
	if s.cfg.MaxFileBytes > 0 {
		return s.cfg.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (s *server) maxArchiveBytes() int64 {
	if s.cfg.MaxArchiveBytes > 0 {
		return s.cfg.MaxArchiveBytes
	}
	return DefaultMaxArchiveBytes
}

// maxUploadBytes bounds an upload of a file whose bytes are data: an
// archive's bound or an image's, as its bytes say.
func (s *server) maxUploadBytes(data []byte) int64 {
	if files.KindOf(files.Sniff(data)) == files.KindArchive {
		return s.maxArchiveBytes()
	}
	return s.maxFileBytes()
}

func (s *server) maxInlineBytes() int64 {
	if s.cfg.MaxInlineAttachmentBytes > 0 {
		return s.cfg.MaxInlineAttachmentBytes
	}
	return DefaultMaxInlineAttachmentBytes
}

// inlineAllowance is what a run request or a message body may carry
// beyond its own limit: the inline attachments, base64, with their JSON.
func (s *server) inlineAllowance() int64 {
	return (s.maxInlineBytes()+2)/3*4 + int64(files.MaxAttachments)*1024
}

// boundBody applies limit to a body of n bytes without its inline
// attachments, once decoded (decodeErr is the decoder's verdict): the
// limit a body is read with grows by inlineAllowance, for them alone.
func (s *server) boundBody(n int, limit int64, atts []runs.Attachment, decodeErr error) error {
	if int64(n) <= limit {
		return decodeErr
	}
	var inline int64
	for _, a := range atts {
		inline += (int64(len(a.Data)) + 2) / 3 * 4
	}
	if decodeErr != nil || int64(n)-inline > limit {
		return edgeErr(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
			fmt.Sprintf("request body is larger than %d bytes (besides its inline attachments)", limit))
	}
	return nil
}

// checkInline bounds the decoded bytes of a request's inline attachments.
func (s *server) checkInline(field string, atts []runs.Attachment) error {
	var n int64
	for _, a := range atts {
		n += int64(len(a.Data))
	}
	if max := s.maxInlineBytes(); n > max {
		return edgeErr(http.StatusRequestEntityTooLarge, CodeFileTooLarge, field,
			fmt.Sprintf("field %q: the inline attachments are %d bytes; at most %d are accepted (upload larger images with POST /v1/files)", field, n, max))
	}
	return nil
}

// fileProblem maps a *files.Refusal to its status and code.
func fileProblem(err error) (problem, bool) {
	var fe *files.Refusal
	if !errors.As(err, &fe) {
		return problem{}, false
	}
	status := http.StatusBadRequest
	switch fe.Code {
	case files.TooLarge:
		status = http.StatusRequestEntityTooLarge
	case files.TooManyFiles:
		status = http.StatusTooManyRequests
	}
	return problem{status: status, detail: ErrorDetail{Code: fe.Code, Message: fe.Error(), Field: fe.Field}}, true
}

func (s *server) fileService(w http.ResponseWriter, r *http.Request) (FileService, bool) {
	fs, ok := s.svc.(FileService)
	if !ok {
		s.fail(w, r, edgeErr(http.StatusNotFound, CodeNotFound, "", "files are not enabled on this gateway"))
	}
	return fs, ok
}

// fileResponse is a file as the API shows it: an image has a width and a
// height, an archive none.
type fileResponse struct {
	ID        string    `json:"id"`
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

func fileBody(f files.File) fileResponse {
	return fileResponse{ID: f.ID, Kind: f.Kind, MediaType: f.MediaType, Size: f.Size, SHA256: f.SHA256, Name: f.Name,
		Width: f.Width, Height: f.Height, CreatedAt: f.CreatedAt.UTC(), ExpiresAt: f.ExpiresAt.UTC()}
}

// uploadFile answers POST /v1/files: one image or archive, as the part
// "file" of a multipart/form-data body or as the whole body with its
// media type; 201 with the file. The body may be as large as the larger
// bound; the file is then bounded as what its bytes say it is.
func (s *server) uploadFile(w http.ResponseWriter, r *http.Request) {
	fs, ok := s.fileService(w, r)
	if !ok {
		return
	}
	max := max(s.maxFileBytes(), s.maxArchiveBytes())
	body, err := readBody(w, r, max+64<<10, s.cfg.BodyReadTimeout)
	var edge *edgeError
	if errors.As(err, &edge) && edge.code == CodeBodyTooLarge {
		err = edgeErr(http.StatusRequestEntityTooLarge, CodeFileTooLarge, "file",
			fmt.Sprintf("the file is larger than %d bytes", max))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	up, err := parseUpload(r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"), r.URL.Query().Get("name"), body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if max := s.maxUploadBytes(up.data); int64(len(up.data)) > max {
		s.fail(w, r, edgeErr(http.StatusRequestEntityTooLarge, CodeFileTooLarge, "file",
			fmt.Sprintf("the file is %d bytes; at most %d are accepted", len(up.data), max)))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	f, err := fs.UploadFile(ctx, up.name, up.mediaType, up.data)
	if err != nil {
		s.fail(w, r, fmt.Errorf("upload file: %w", err))
		return
	}
	w.Header().Set("Location", "/v1/files/"+url.PathEscape(f.ID))
	s.writeJSON(w, r, http.StatusCreated, fileBody(f))
}

// upload is a file as a request carried it.
type upload struct {
	name, mediaType string
	data            []byte
}

// parseUpload reads the file of a POST /v1/files body whose Content-Type
// is contentType: the part "file" of a multipart/form-data body (its
// filename the name, its Content-Type the declared type), or the body
// itself, declared by contentType and named by the query's name or by
// Content-Disposition's filename. application/octet-stream declares
// nothing: the bytes say what they are.
func parseUpload(contentType, disposition, queryName string, body []byte) (upload, error) {
	if contentType == "" {
		return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, "file",
			"the request has no Content-Type: send multipart/form-data with a part \"file\", or the file with its media type")
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, "file",
			"the Content-Type "+strconv.Quote(echoed(contentType))+" does not parse")
	}
	if mt != "multipart/form-data" {
		up := upload{name: queryName, mediaType: contentType, data: body}
		if mt == "application/octet-stream" {
			up.mediaType = ""
		}
		if up.name == "" && disposition != "" {
			if _, dp, err := mime.ParseMediaType(disposition); err == nil {
				up.name = dp["filename"]
			}
		}
		return up, nil
	}
	boundary := params["boundary"]
	if boundary == "" {
		return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, "file", "the multipart/form-data body has no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var up *upload
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, "file",
				"the multipart/form-data body does not parse: "+echoed(err.Error()))
		}
		name := p.FormName()
		if name != "file" {
			p.Close()
			return upload{}, edgeErr(http.StatusBadRequest, CodeUnknownField, echoed(name),
				"unknown form field "+quote(name)+": send the file as the part \"file\"")
		}
		if up != nil {
			p.Close()
			return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidField, "file", "the form has more than one part \"file\"; upload one file per request")
		}
		data, err := io.ReadAll(p)
		p.Close()
		if err != nil {
			return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidAttachment, "file",
				"the part \"file\" does not parse: "+echoed(err.Error()))
		}
		u := upload{name: p.FileName(), mediaType: p.Header.Get("Content-Type"), data: data}
		if m, _, _ := mime.ParseMediaType(u.mediaType); m == "application/octet-stream" {
			u.mediaType = ""
		}
		if queryName != "" {
			u.name = queryName
		}
		up = &u
	}
	if up == nil {
		return upload{}, edgeErr(http.StatusBadRequest, CodeInvalidField, "file", "the form has no part \"file\"")
	}
	return *up, nil
}

// fileID returns the {id} of a file route; anything but a file id is a
// 404 without asking the service.
func fileID(r *http.Request) (string, error) {
	id := chi.URLParam(r, "id")
	if !files.ValidID(id) {
		return "", edgeErr(http.StatusNotFound, CodeNotFound, "", "no file with id "+quote(id))
	}
	return id, nil
}

// getFile answers GET /v1/files/{id}: the file's record.
func (s *server) getFile(w http.ResponseWriter, r *http.Request) {
	fs, ok := s.fileService(w, r)
	if !ok {
		return
	}
	id, err := fileID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := fs.GetFile(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Errorf("get file %s: %w", id, err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, fileBody(f))
}

// getFileContent answers GET /v1/files/{id}/content: the bytes, as the
// file's media type, never to be sniffed or run as a page; an archive to
// be saved, not shown.
func (s *server) getFileContent(w http.ResponseWriter, r *http.Request) {
	fs, ok := s.fileService(w, r)
	if !ok {
		return
	}
	id, err := fileID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, data, err := fs.FileContent(r.Context(), id)
	if err != nil {
		s.fail(w, r, fmt.Errorf("get file %s: %w", id, err))
		return
	}
	h := w.Header()
	mt := f.MediaType
	if !files.Accepted(mt) {
		mt = "application/octet-stream"
	}
	h.Set("Content-Type", mt)
	if files.KindOf(mt) == files.KindArchive {
		h.Set("Content-Disposition", "attachment")
	}
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, max-age=0")
	h.Set("ETag", `"`+f.SHA256+`"`)
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}

// deleteFile answers DELETE /v1/files/{id}: 204. A run that took the file
// keeps its own copy.
func (s *server) deleteFile(w http.ResponseWriter, r *http.Request) {
	fs, ok := s.fileService(w, r)
	if !ok {
		return
	}
	id, err := fileID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := fs.DeleteFile(r.Context(), id); err != nil {
		s.fail(w, r, fmt.Errorf("delete file %s: %w", id, err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// messageBody reads and decodes the body of POST /v1/runs/{id}/messages,
// whose inline attachments may make it larger than other inputs.
func (s *server) messageBody(w http.ResponseWriter, r *http.Request) (runs.Input, error) {
	limit := min(s.cfg.MaxBodyBytes, maxInputBody)
	body, err := readBody(w, r, limit+s.inlineAllowance(), s.cfg.BodyReadTimeout)
	if err != nil {
		return runs.Input{}, err
	}
	if len(body) > 0 {
		if err := checkJSONContentType(r.Header); err != nil {
			return runs.Input{}, err
		}
	}
	in, err := decodeMessage(body)
	if err = s.boundBody(len(body), limit, in.Attachments, err); err != nil {
		return runs.Input{}, err
	}
	return in, s.checkInline(fieldAttach, in.Attachments)
}
