package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentgate/agentgate/internal/runs"
)

// Store keeps uploaded files, per tenant, for every replica.
// internal/store implements it.
type Store interface {
	// PutFile stores an uploaded file, its record and its bytes, for
	// every replica; the store drops it after its file TTL.
	PutFile(ctx context.Context, f File, data []byte) error
	// GetFile returns the record of the tenant's file, or an error
	// wrapping runs.ErrNotFound (none, another tenant's, deleted,
	// expired).
	GetFile(ctx context.Context, tenant, id string) (File, error)
	// FileData returns the bytes of the tenant's file, or an error
	// wrapping runs.ErrNotFound.
	FileData(ctx context.Context, tenant, id string) ([]byte, error)
	// DeleteFile removes the tenant's file, or fails with an error
	// wrapping runs.ErrNotFound.
	DeleteFile(ctx context.Context, tenant, id string) error
	// CountFiles is how many files the tenant keeps.
	CountFiles(ctx context.Context, tenant string) (int, error)
}

// Uploads creates, reads, deletes and counts tenants' files, within its
// Limits, on its clock. Every method names the tenant: a tenant never
// reaches another's file, which is to it no file at all.
type Uploads struct {
	store  Store
	limits Limits
	now    func() time.Time
}

// NewUploads returns the uploads kept in store, bounded by limits (a zero
// field takes its default), expiring on the clock now (nil: time.Now).
func NewUploads(store Store, limits Limits, now func() time.Time) *Uploads {
	if now == nil {
		now = time.Now
	}
	return &Uploads{store: store, limits: limits.withDefaults(), now: now}
}

// UploadField is the request field of an uploaded file.
const UploadField = "file"

// Upload checks data as an image or an archive, as Check does for an
// image, and stores it as a file of tenant: what POST /v1/files takes.
func (u *Uploads) Upload(ctx context.Context, tenant, name, mediaType string, data []byte) (File, error) {
	f, err := u.check(ctx, tenant, UploadField, name, mediaType, data, true)
	if err != nil {
		return File{}, err
	}
	return f, u.put(ctx, f, data)
}

// Create checks data as Check does and stores it as a file of tenant: an
// image attached inline.
func (u *Uploads) Create(ctx context.Context, tenant, field, name, mediaType string, data []byte) (File, error) {
	f, err := u.Check(ctx, tenant, field, name, mediaType, data)
	if err != nil {
		return File{}, err
	}
	return f, u.put(ctx, f, data)
}

func (u *Uploads) put(ctx context.Context, f File, data []byte) error {
	if err := u.store.PutFile(ctx, f, data); err != nil {
		return fmt.Errorf("store file: %w", err)
	}
	return nil
}

// Check returns the record data would have as an image of tenant,
// declared as mediaType ("" takes what the bytes say), without storing
// it. A refusal is a *Refusal naming field (TooLarge, InvalidAttachment
// for bad bytes, an archive or a bad name, TooManyFiles); any other error
// is the store's.
func (u *Uploads) Check(ctx context.Context, tenant, field, name, mediaType string, data []byte) (File, error) {
	return u.check(ctx, tenant, field, name, mediaType, data, false)
}

// check is Check, taking an archive too when archives is set.
func (u *Uploads) check(ctx context.Context, tenant, field, name, mediaType string, data []byte, archives bool) (File, error) {
	largest := u.limits.MaxBytes
	if archives {
		largest = max(largest, u.limits.MaxArchiveBytes)
	}
	if err := tooLarge(field, "file", len(data), largest); err != nil {
		return File{}, err
	}
	if err := checkName(name); err != nil {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: "the name " + err.Error()}
	}
	info, err := Check(data, mediaType)
	if err != nil {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: err.Error()}
	}
	kind := KindOf(info.MediaType)
	if kind == KindArchive && !archives {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: fmt.Sprintf(
			"the file is an archive (%s), not an image: attach a PNG, JPEG, GIF or WebP image (an archive is for %s)", info.MediaType, ArchiveField)}
	}
	if err := tooLarge(field, kind, len(data), u.limits.maxBytes(kind)); err != nil {
		return File{}, err
	}
	if err := u.checkRoom(ctx, tenant, field); err != nil {
		return File{}, err
	}
	return u.record(tenant, name, kind, info, data)
}

// tooLarge refuses n bytes of what (a file, an image, an archive) beyond
// limit.
func tooLarge(field, what string, n int, limit int64) error {
	if int64(n) <= limit {
		return nil
	}
	return &Refusal{Code: TooLarge, Field: field,
		Reason: fmt.Sprintf("the %s is %d bytes; at most %d are accepted", what, n, limit)}
}

// record is the record of checked data, a new file of tenant.
func (u *Uploads) record(tenant, name, kind string, info Info, data []byte) (File, error) {
	id, err := newID()
	if err != nil {
		return File{}, err
	}
	sum := sha256.Sum256(data)
	now := u.now().UTC().Truncate(time.Millisecond)
	return File{
		ID: id, Tenant: tenant, Kind: kind, MediaType: info.MediaType, Size: int64(len(data)),
		SHA256: hex.EncodeToString(sum[:]), Name: name, Width: info.Width, Height: info.Height,
		CreatedAt: now, ExpiresAt: now.Add(u.limits.TTL),
	}, nil
}

// checkRoom refuses a file to a tenant that keeps as many as it may.
func (u *Uploads) checkRoom(ctx context.Context, tenant, field string) error {
	n, err := u.Count(ctx, tenant)
	if err != nil {
		return err
	}
	if n >= u.limits.MaxPerTenant {
		return &Refusal{Code: TooManyFiles, Field: field,
			Reason: fmt.Sprintf("the tenant keeps %d files, the most it may; delete some, or wait for them to expire", n)}
	}
	return nil
}

// Count is how many files tenant keeps.
func (u *Uploads) Count(ctx context.Context, tenant string) (int, error) {
	n, err := u.store.CountFiles(ctx, tenant)
	if err != nil {
		return 0, fmt.Errorf("count files: %w", err)
	}
	return n, nil
}

// Get returns tenant's file, or an error wrapping runs.ErrNotFound (none,
// another tenant's, expired, or an id that is no file's).
func (u *Uploads) Get(ctx context.Context, tenant, id string) (File, error) {
	if !ValidID(id) {
		return File{}, fmt.Errorf("file %q: %w", id, runs.ErrNotFound)
	}
	f, err := u.store.GetFile(ctx, tenant, id)
	if err != nil {
		return File{}, err
	}
	if !u.now().Before(f.ExpiresAt) {
		// The store drops it soon; it is gone already.
		return File{}, fmt.Errorf("file %s expired: %w", id, runs.ErrNotFound)
	}
	if f.Kind == "" {
		// Kept before files had kinds, when all were images.
		f.Kind = KindImage
	}
	return f, nil
}

// Attachment returns tenant's image that the attachment field names by
// id. A refusal is a *Refusal naming field: NotFound, or
// InvalidAttachment for an archive; any other error is the store's.
func (u *Uploads) Attachment(ctx context.Context, tenant, field, id string) (File, error) {
	f, err := u.Get(ctx, tenant, id)
	if err != nil {
		return File{}, notFound(field, id, err)
	}
	if f.Kind != KindImage {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: fmt.Sprintf(
			"file %s is an archive (%s), not an image: attach a PNG, JPEG, GIF or WebP image", f.ID, f.MediaType)}
	}
	return f, nil
}

// Archive returns tenant's archive that a workspace names by id, and its
// bytes. A refusal is a *Refusal naming ArchiveField: NotFound, or
// NotAnArchive for an image; any other error is the store's.
func (u *Uploads) Archive(ctx context.Context, tenant, id string) (File, []byte, error) {
	f, err := u.Get(ctx, tenant, id)
	if err != nil {
		return File{}, nil, notFound(ArchiveField, id, err)
	}
	if f.Kind != KindArchive {
		return File{}, nil, &Refusal{Code: NotAnArchive, Field: ArchiveField, Reason: fmt.Sprintf(
			"file %s is an image (%s), not an archive: upload a tar, gzipped tar or zip with POST /v1/files", f.ID, f.MediaType)}
	}
	data, err := u.store.FileData(ctx, tenant, id)
	if err != nil {
		return File{}, nil, notFound(ArchiveField, id, err)
	}
	return f, data, nil
}

// notFound is the refusal of field for a file the tenant does not have
// (err wraps runs.ErrNotFound), or err, the store's, with context.
func notFound(field, id string, err error) error {
	if errors.Is(err, runs.ErrNotFound) {
		return &Refusal{Code: NotFound, Field: field, Reason: fmt.Sprintf(
			"no file %q: it was never uploaded by this tenant, or it expired or was deleted", clip(id))}
	}
	return fmt.Errorf("read file %s: %w", clip(id), err)
}

// Content returns tenant's file, as Get does, and its bytes.
func (u *Uploads) Content(ctx context.Context, tenant, id string) (File, []byte, error) {
	f, err := u.Get(ctx, tenant, id)
	if err != nil {
		return File{}, nil, err
	}
	data, err := u.store.FileData(ctx, tenant, id)
	if err != nil {
		return File{}, nil, err
	}
	return f, data, nil
}

// Data returns the bytes of tenant's file as the store keeps them, without
// reading its record first: for a file already checked, when it was
// attached.
func (u *Uploads) Data(ctx context.Context, tenant, id string) ([]byte, error) {
	return u.store.FileData(ctx, tenant, id)
}

// Delete removes tenant's file, or fails with an error wrapping
// runs.ErrNotFound. A run that already took it keeps its copy.
func (u *Uploads) Delete(ctx context.Context, tenant, id string) error {
	if _, err := u.Get(ctx, tenant, id); err != nil {
		return err
	}
	return u.store.DeleteFile(ctx, tenant, id)
}
