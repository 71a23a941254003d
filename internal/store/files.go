package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgate/agentgate/internal/files"
	"github.com/agentgate/agentgate/internal/runs"
)

// Uploaded files: the object store "agentgate_files" holds each file's
// bytes, chunked, with its record (files.File) in the object's metadata.
// An object is named by its tenant and id, "<tenant>/<id>", so that a
// tenant's lookup cannot reach another's file, and the bucket's TTL drops
// every file after the gateway's file TTL.
const (
	filesBucket = "agentgate_files"
	fileRecord  = "agentgate-file" // metadata key of the record
	// DefaultFileTTL is Options.FileTTL's default.
	DefaultFileTTL = 24 * time.Hour
)

func (s *Store) openFiles(ctx context.Context, opts Options) error {
	ttl := opts.FileTTL
	if ttl <= 0 {
		ttl = DefaultFileTTL
	}
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      filesBucket,
		Description: "agentgate uploaded files",
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err := s.ensure(ctx, "create object store "+filesBucket, func(ctx context.Context) error {
		var err error
		s.files, err = s.js.CreateOrUpdateObjectStore(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("object store %s: %w", filesBucket, err)
	}
	return nil
}

var _ files.Store = (*Store)(nil)

func fileName(tenant, id string) string { return tenant + "/" + id }

// PutFile stores f's record and data.
func (s *Store) PutFile(ctx context.Context, f files.File, data []byte) error {
	if err := checkID(f.ID); err != nil {
		return err
	}
	rec, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("put file: %w", err)
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	meta := jetstream.ObjectMeta{Name: fileName(f.Tenant, f.ID), Metadata: map[string]string{fileRecord: string(rec)}}
	err = s.ensure(ctx, "put file", func(ctx context.Context) error {
		_, err := s.files.Put(ctx, meta, bytes.NewReader(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("put file %s: %w", f.ID, err)
	}
	return nil
}

// GetFile returns the record of the tenant's file.
func (s *Store) GetFile(ctx context.Context, tenant, id string) (files.File, error) {
	if checkID(id) != nil {
		return files.File{}, fmt.Errorf("file %q: %w", id, runs.ErrNotFound)
	}
	var info *jetstream.ObjectInfo
	err := s.retry(ctx, "read file", func(ctx context.Context) error {
		var err error
		info, err = s.files.GetInfo(ctx, fileName(tenant, id))
		return notFound(err)
	})
	if err != nil {
		return files.File{}, fileErr(id, err)
	}
	return fileOf(info)
}

func fileOf(info *jetstream.ObjectInfo) (files.File, error) {
	var f files.File
	if err := json.Unmarshal([]byte(info.Metadata[fileRecord]), &f); err != nil {
		return files.File{}, fmt.Errorf("file %s: decode its record: %w", info.Name, err)
	}
	if !time.Now().Before(f.ExpiresAt) {
		// The bucket's TTL drops it soon: it is gone already.
		return files.File{}, fmt.Errorf("file %s expired: %w", f.ID, runs.ErrNotFound)
	}
	return f, nil
}

// FileData returns the bytes of the tenant's file.
func (s *Store) FileData(ctx context.Context, tenant, id string) ([]byte, error) {
	if checkID(id) != nil {
		return nil, fmt.Errorf("file %q: %w", id, runs.ErrNotFound)
	}
	var data []byte
	var info *jetstream.ObjectInfo
	err := s.retry(ctx, "read file", func(ctx context.Context) error {
		r, err := s.files.Get(ctx, fileName(tenant, id))
		if err != nil {
			return notFound(err)
		}
		defer r.Close()
		if info, err = r.Info(); err != nil {
			return err
		}
		data, err = io.ReadAll(r)
		return err
	})
	if err != nil {
		return nil, fileErr(id, err)
	}
	if _, err := fileOf(info); err != nil {
		return nil, err
	}
	return data, nil
}

// DeleteFile removes the tenant's file: its bytes at once, its record
// marked deleted.
func (s *Store) DeleteFile(ctx context.Context, tenant, id string) error {
	if checkID(id) != nil {
		return fmt.Errorf("file %q: %w", id, runs.ErrNotFound)
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	err := s.ensure(ctx, "delete file", func(ctx context.Context) error {
		// Delete finds a deleted object too, and deletes it again.
		if _, err := s.files.GetInfo(ctx, fileName(tenant, id)); err != nil {
			return notFound(err)
		}
		return notFound(s.files.Delete(ctx, fileName(tenant, id)))
	})
	if err != nil {
		return fileErr(id, err)
	}
	return nil
}

// CountFiles counts the tenant's files by listing the bucket's records:
// the bucket holds at most every tenant's bounded number of files.
func (s *Store) CountFiles(ctx context.Context, tenant string) (int, error) {
	var list []*jetstream.ObjectInfo
	err := s.retry(ctx, "list files", func(ctx context.Context) error {
		var err error
		list, err = s.files.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			list, err = nil, nil
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("list files: %w", err)
	}
	prefix, n := tenant+"/", 0
	for _, info := range list {
		if strings.HasPrefix(info.Name, prefix) && !strings.Contains(info.Name[len(prefix):], "/") {
			if _, err := fileOf(info); err == nil {
				n++
			}
		}
	}
	return n, nil
}

// notFound maps the object store's "no such object" to runs.ErrNotFound,
// which is an answer, not a failure to retry.
func notFound(err error) error {
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return runs.ErrNotFound
	}
	return err
}

func fileErr(id string, err error) error {
	return fmt.Errorf("file %s: %w", id, err)
}
