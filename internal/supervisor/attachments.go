package supervisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/clip"
	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// errNoUploads answers for files on a supervisor that keeps none.
var errNoUploads = fmt.Errorf("files are not enabled on this gateway: %w", runs.ErrNotFound)

// UploadFile checks data as an image or an archive declared as mediaType
// ("" takes what the bytes say) and stores it as a file of the caller's
// tenant. Errors: a *files.Refusal (InvalidAttachment, TooLarge,
// TooManyFiles), or the store's.
func (s *Supervisor) UploadFile(ctx context.Context, name, mediaType string, data []byte) (files.File, error) {
	if s.cfg.Uploads == nil {
		return files.File{}, errNoUploads
	}
	f, err := s.cfg.Uploads.Upload(ctx, runs.ActorFrom(ctx).Tenant, name, mediaType, data)
	if err != nil {
		return files.File{}, err
	}
	s.auditFile(ctx, f)
	return f, nil
}

// putFile stores an image of tenant attached inline, and audits it as the
// caller's.
func (s *Supervisor) putFile(ctx context.Context, tenant, field, name, mediaType string, data []byte) (files.File, error) {
	if s.cfg.Uploads == nil {
		return files.File{}, errNoUploads
	}
	f, err := s.cfg.Uploads.Create(ctx, tenant, field, name, mediaType, data)
	if err != nil {
		return files.File{}, err
	}
	s.auditFile(ctx, f)
	return f, nil
}

// auditFile audits a file stored for the caller.
func (s *Supervisor) auditFile(ctx context.Context, f files.File) {
	s.audit("file.create", runs.ActorFrom(ctx), "", zap.String("file_id", f.ID), zap.String("kind", f.Kind), zap.Int64("size", f.Size))
}

// GetFile returns the caller's tenant's file, or an error wrapping
// ErrNotFound (none, another tenant's, expired).
func (s *Supervisor) GetFile(ctx context.Context, id string) (files.File, error) {
	if s.cfg.Uploads == nil {
		return files.File{}, errNoUploads
	}
	return s.cfg.Uploads.Get(ctx, runs.ActorFrom(ctx).Tenant, id)
}

// FileContent returns the caller's tenant's file and its bytes.
func (s *Supervisor) FileContent(ctx context.Context, id string) (files.File, []byte, error) {
	if s.cfg.Uploads == nil {
		return files.File{}, nil, errNoUploads
	}
	return s.cfg.Uploads.Content(ctx, runs.ActorFrom(ctx).Tenant, id)
}

// DeleteFile removes the caller's tenant's file. A run that already took
// it keeps its copy.
func (s *Supervisor) DeleteFile(ctx context.Context, id string) error {
	if s.cfg.Uploads == nil {
		return errNoUploads
	}
	if err := s.cfg.Uploads.Delete(ctx, runs.ActorFrom(ctx).Tenant, id); err != nil {
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
	if len(atts) > files.MaxAttachments {
		return nil, runs.Invalid(field, fmt.Sprintf("must have at most %d attachments", files.MaxAttachments))
	}
	if s.cfg.Uploads == nil {
		return nil, runs.Unsupported(d.Name, field, "this gateway keeps no files to attach")
	}
	out := make([]runs.Attachment, len(atts))
	for i, a := range atts {
		f, err := s.attachedFile(ctx, tenant, fmt.Sprintf("%s[%d]", field, i), a, store)
		if err != nil {
			return nil, err
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

// attachedFile is the image of the attachment a, the request field named
// at: an inline image checked (and with store, stored), or the tenant's
// image it names.
func (s *Supervisor) attachedFile(ctx context.Context, tenant, at string, a runs.Attachment, store bool) (files.File, error) {
	switch {
	case a.FileID == "" && store:
		return s.putFile(ctx, tenant, at, a.Name, a.MediaType, a.Data)
	case a.FileID == "":
		return s.cfg.Uploads.Check(ctx, tenant, at, a.Name, a.MediaType, a.Data)
	}
	return s.cfg.Uploads.Attachment(ctx, tenant, at, a.FileID)
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
		if !files.ValidID(a.FileID) {
			// The id names a file under dir: nothing but an id may.
			return nil, fmt.Errorf("attachment %q: %w", clip.Text(a.FileID, 64), runs.ErrNotFound)
		}
		data, err := s.fileData(ctx, tenant, a.FileID)
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

func (s *Supervisor) fileData(ctx context.Context, tenant, id string) ([]byte, error) {
	if s.cfg.Uploads == nil {
		return nil, errNoUploads
	}
	return s.cfg.Uploads.Data(ctx, tenant, id)
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
	d := a.Adapter.Describe()
	if slices.Contains(d.Fields, runs.FieldAttachments) && !d.Interaction.MessageAttachments {
		return runs.Unsupported(r.Agent, runs.FieldAttachments, "this agent takes images only with a one-shot run's prompt, not in a message")
	}
	in.Attachments, err = s.attach(ctx, d, r.Tenant, runs.FieldAttachments, in.Attachments, true)
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
		return nil, &files.Refusal{Code: files.NotFound, Field: runs.FieldAttachments,
			Reason: "an attached file expired or was deleted before the message reached its run: " + err.Error()}
	}
	return images, err
}
