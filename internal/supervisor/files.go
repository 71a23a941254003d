package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// FileLimits bound uploaded files and inline attachments. A zero field
// takes its default.
type FileLimits struct {
	// TTL is how long an uploaded file is kept (AGENTGATE_FILE_TTL,
	// default 24 h). The store's bucket expires files after the same.
	TTL time.Duration
	// MaxBytes bounds one file, uploaded or inline
	// (AGENTGATE_MAX_FILE_BYTES, default 5 MiB).
	MaxBytes int64
	// MaxPerTenant bounds the files a tenant keeps at once
	// (AGENTGATE_MAX_FILES_PER_TENANT, default 1000).
	MaxPerTenant int
}

func (l FileLimits) withDefaults() FileLimits {
	if l.TTL <= 0 {
		l.TTL = runs.DefaultFileTTL
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = runs.DefaultMaxFileBytes
	}
	if l.MaxPerTenant <= 0 {
		l.MaxPerTenant = runs.DefaultMaxFilesPerTenant
	}
	return l
}

func (s *Supervisor) fileLimits() FileLimits { return s.cfg.Files.withDefaults() }

// UploadFile checks data as an image declared as mediaType ("" takes what
// the bytes say) and stores it as a file of the caller's tenant. Errors: a
// *FileError (InvalidAttachment, FileTooLarge, TooManyFiles), a
// *FieldError for a bad name, or the store's.
func (s *Supervisor) UploadFile(ctx context.Context, name, mediaType string, data []byte) (runs.File, error) {
	return s.putFile(ctx, runs.ActorFrom(ctx).Tenant, "file", name, mediaType, data)
}

func (s *Supervisor) putFile(ctx context.Context, tenant, field, name, mediaType string, data []byte) (runs.File, error) {
	f, err := s.newFile(ctx, tenant, field, name, mediaType, data)
	if err != nil {
		return runs.File{}, err
	}
	if err := s.store.PutFile(ctx, f, data); err != nil {
		return runs.File{}, fmt.Errorf("store file: %w", err)
	}
	s.audit("file.create", runs.ActorFrom(ctx), "", zap.String("file_id", f.ID), zap.Int64("size", f.Size))
	return f, nil
}

// newFile checks data as putFile stores it, and returns its record.
func (s *Supervisor) newFile(ctx context.Context, tenant, field, name, mediaType string, data []byte) (runs.File, error) {
	lim := s.fileLimits()
	if int64(len(data)) > lim.MaxBytes {
		return runs.File{}, &runs.FileError{Code: runs.FileTooLarge, Field: field,
			Reason: fmt.Sprintf("the file is %d bytes; at most %d are accepted", len(data), lim.MaxBytes)}
	}
	if err := checkFileName(name); err != nil {
		return runs.File{}, &runs.FileError{Code: runs.InvalidAttachment, Field: field, Reason: "the name " + err.Error()}
	}
	info, err := files.Check(data, mediaType)
	if err != nil {
		return runs.File{}, &runs.FileError{Code: runs.InvalidAttachment, Field: field, Reason: err.Error()}
	}
	n, err := s.store.CountFiles(ctx, tenant)
	if err != nil {
		return runs.File{}, fmt.Errorf("count files: %w", err)
	}
	if n >= lim.MaxPerTenant {
		return runs.File{}, &runs.FileError{Code: runs.TooManyFiles, Field: field,
			Reason: fmt.Sprintf("the tenant keeps %d files, the most it may; delete some, or wait for them to expire", n)}
	}
	id, err := uuid.NewV7()
	if err != nil {
		return runs.File{}, fmt.Errorf("new file id: %w", err)
	}
	sum := sha256.Sum256(data)
	now := s.cfg.Now().UTC().Truncate(time.Millisecond)
	f := runs.File{
		ID: runs.FileID(id.String()), Tenant: tenant, MediaType: info.MediaType, Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Name: name, Width: info.Width, Height: info.Height,
		CreatedAt: now, ExpiresAt: now.Add(lim.TTL),
	}
	return f, nil
}

// checkFileName accepts a name to show, not a path: printable, bounded,
// without slashes.
func checkFileName(name string) error {
	if len(name) > runs.MaxFileNameBytes {
		return fmt.Errorf("must be at most %d bytes", runs.MaxFileNameBytes)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || r == '/' || r == '\\' || r == 0xfffd {
			return errors.New("must be printable UTF-8 without slashes")
		}
	}
	return nil
}

// GetFile returns the caller's tenant's file, or an error wrapping
// ErrNotFound (none, another tenant's, expired).
func (s *Supervisor) GetFile(ctx context.Context, id string) (runs.File, error) {
	return s.tenantFile(ctx, runs.ActorFrom(ctx).Tenant, id)
}

func (s *Supervisor) tenantFile(ctx context.Context, tenant, id string) (runs.File, error) {
	if !runs.ValidFileID(id) {
		return runs.File{}, fmt.Errorf("file %q: %w", id, runs.ErrNotFound)
	}
	f, err := s.store.GetFile(ctx, tenant, id)
	if err != nil {
		return runs.File{}, err
	}
	if !s.cfg.Now().Before(f.ExpiresAt) {
		// The store drops it soon; it is gone already.
		return runs.File{}, fmt.Errorf("file %s expired: %w", id, runs.ErrNotFound)
	}
	return f, nil
}

// FileContent returns the caller's tenant's file and its bytes.
func (s *Supervisor) FileContent(ctx context.Context, id string) (runs.File, []byte, error) {
	f, err := s.GetFile(ctx, id)
	if err != nil {
		return runs.File{}, nil, err
	}
	data, err := s.store.FileData(ctx, f.Tenant, id)
	if err != nil {
		return runs.File{}, nil, err
	}
	return f, data, nil
}

// DeleteFile removes the caller's tenant's file. A run that already took
// it keeps its copy.
func (s *Supervisor) DeleteFile(ctx context.Context, id string) error {
	f, err := s.GetFile(ctx, id)
	if err != nil {
		return err
	}
	if err := s.store.DeleteFile(ctx, f.Tenant, id); err != nil {
		return err
	}
	s.audit("file.delete", runs.ActorFrom(ctx), "", zap.String("file_id", id))
	return nil
}

// attach checks the attachments of a prompt or a message (the request
// field named field) for an agent described by d: the agent must take
// them, an inline image is stored as a file of the tenant, and a file
// named by id must be the tenant's. It returns the attachments as they are
// kept: by file id, with their media type, size and name, without bytes.
// With store false nothing is stored: the attachments are only checked,
// and returned as they were.
func (s *Supervisor) attach(ctx context.Context, d runs.Description, tenant, field string, atts []runs.Attachment, store bool) ([]runs.Attachment, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	if !slices.Contains(d.Fields, runs.FieldAttachments) {
		return nil, runs.Unsupported(d.Name, field, "this agent does not take image attachments")
	}
	if len(atts) > runs.MaxAttachments {
		return nil, runs.Invalid(field, fmt.Sprintf("must have at most %d attachments", runs.MaxAttachments))
	}
	out := make([]runs.Attachment, len(atts))
	for i, a := range atts {
		at := fmt.Sprintf("%s[%d]", field, i)
		var f runs.File
		var err error
		if a.FileID == "" {
			put := s.putFile
			if !store {
				put = s.newFile
			}
			if f, err = put(ctx, tenant, at, a.Name, a.MediaType, a.Data); err != nil {
				return nil, err
			}
		} else if f, err = s.tenantFile(ctx, tenant, a.FileID); errors.Is(err, runs.ErrNotFound) {
			return nil, &runs.FileError{Code: runs.FileNotFound, Field: at,
				Reason: fmt.Sprintf("no file %q: it was never uploaded by this tenant, or it expired or was deleted", clipID(a.FileID))}
		} else if err != nil {
			return nil, fmt.Errorf("read file %s: %w", a.FileID, err)
		}
		name := a.Name
		if name == "" {
			name = f.Name
		}
		out[i] = runs.Attachment{FileID: f.ID, MediaType: f.MediaType, Name: name, Size: f.Size, SHA256: f.SHA256}
	}
	if !store {
		return atts, nil
	}
	return out, nil
}

func clipID(id string) string {
	if len(id) > 64 {
		return id[:64] + "…"
	}
	return id
}

// attachmentsDir is where a run's images are written, under its temporary
// directory: inside the sandbox, and removed with the run.
const attachmentsDir = "attachments"

// materialise fetches the attachments' bytes from the store and writes
// each to the run's temporary directory tmp, for the adapter to pass as
// its CLI takes them.
func (s *Supervisor) materialise(ctx context.Context, tenant, tmp string, atts []runs.Attachment) ([]runs.Image, error) {
	if len(atts) == 0 {
		return nil, nil
	}
	dir := filepath.Join(tmp, attachmentsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the attachments directory: %w", err)
	}
	images := make([]runs.Image, 0, len(atts))
	for _, a := range atts {
		if !runs.ValidFileID(a.FileID) {
			// The id names a file under dir: nothing but an id may.
			return nil, fmt.Errorf("attachment %q: %w", clipID(a.FileID), runs.ErrNotFound)
		}
		data, err := s.store.FileData(ctx, tenant, a.FileID)
		if err != nil {
			return nil, fmt.Errorf("attachment %s: %w", a.FileID, err)
		}
		path := filepath.Join(dir, a.FileID+extension(a.MediaType))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("write attachment %s: %w", a.FileID, err)
		}
		images = append(images, runs.Image{Path: path, MediaType: a.MediaType, Data: data})
	}
	return images, nil
}

// materialiseForRun is materialise for a run about to start: its failure is
// the run's.
func (s *Supervisor) materialiseForRun(t *task, tmp string) ([]runs.Image, *runs.RunError) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	images, err := s.materialise(ctx, t.run.Tenant, tmp, t.run.Spec.Attachments)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, runs.NewRunError(runs.Internal, "an attached file is no longer available: "+err.Error(),
			"attach the images again (uploaded files expire after the gateway's file TTL) and submit the run again")
	}
	if err != nil {
		return nil, runs.NewRunError(runs.Internal, "the run's attachments could not be prepared: "+err.Error(), "submit the run again")
	}
	return images, nil
}

// extension is the file name extension of an accepted media type: some
// CLIs tell an image by its name.
func extension(mt string) string {
	switch mt {
	case files.PNG:
		return ".png"
	case files.JPEG:
		return ".jpg"
	case files.GIF:
		return ".gif"
	case files.WebP:
		return ".webp"
	}
	return ""
}

// attachInput checks the attachments of a message for the run id, on the
// replica that took the request: inline images become files of the run's
// tenant, so that the input crosses to the run's replica with ids only.
func (s *Supervisor) attachInput(ctx context.Context, id string, in *runs.Input) error {
	if in.Kind != runs.InputMessage || len(in.Attachments) == 0 {
		return nil
	}
	r, err := s.store.GetRun(ctx, id)
	if err != nil {
		return err
	}
	a, ok := s.agents[r.Agent]
	if !ok {
		return runs.Unsupported(r.Agent, runs.FieldAttachments, "the run's agent is not configured on this replica")
	}
	in.Attachments, err = s.attach(ctx, a.Adapter.Describe(), r.Tenant, runs.FieldAttachments, in.Attachments, true)
	return err
}

// inputImages writes a message's attachments into the run's temporary
// directory, on the replica that runs it.
func (s *Supervisor) inputImages(t *task, in runs.Input) ([]runs.Image, error) {
	if in.Kind != runs.InputMessage || len(in.Attachments) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	images, err := s.materialise(ctx, t.run.Tenant, t.tmp, in.Attachments)
	if errors.Is(err, runs.ErrNotFound) {
		return nil, &runs.FileError{Code: runs.FileNotFound, Field: runs.FieldAttachments,
			Reason: "an attached file expired or was deleted before the message reached its run: " + err.Error()}
	}
	return images, err
}
