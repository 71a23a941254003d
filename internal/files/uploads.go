package files

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// Create checks data as Check does and stores it as a file of tenant.
func (u *Uploads) Create(ctx context.Context, tenant, field, name, mediaType string, data []byte) (File, error) {
	f, err := u.Check(ctx, tenant, field, name, mediaType, data)
	if err != nil {
		return File{}, err
	}
	if err := u.store.PutFile(ctx, f, data); err != nil {
		return File{}, fmt.Errorf("store file: %w", err)
	}
	return f, nil
}

// Check returns the record data would have as a file of tenant, declared
// as mediaType ("" takes what the bytes say), without storing it. A
// refusal is a *Refusal naming field (TooLarge, InvalidAttachment for bad
// bytes or a bad name, TooManyFiles); any other error is the store's.
func (u *Uploads) Check(ctx context.Context, tenant, field, name, mediaType string, data []byte) (File, error) {
	if int64(len(data)) > u.limits.MaxBytes {
		return File{}, &Refusal{Code: TooLarge, Field: field,
			Reason: fmt.Sprintf("the file is %d bytes; at most %d are accepted", len(data), u.limits.MaxBytes)}
	}
	if err := checkName(name); err != nil {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: "the name " + err.Error()}
	}
	info, err := Check(data, mediaType)
	if err != nil {
		return File{}, &Refusal{Code: InvalidAttachment, Field: field, Reason: err.Error()}
	}
	if err := u.checkRoom(ctx, tenant, field); err != nil {
		return File{}, err
	}
	id, err := newID()
	if err != nil {
		return File{}, err
	}
	sum := sha256.Sum256(data)
	now := u.now().UTC().Truncate(time.Millisecond)
	return File{
		ID: id, Tenant: tenant, MediaType: info.MediaType, Size: int64(len(data)),
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
	return f, nil
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
