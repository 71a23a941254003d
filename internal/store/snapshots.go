package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/agentgate/agentgate/internal/runs"
)

// Snapshots: the object store "agentgate_snapshots" holds runs' workspaces
// and sessions' state, each as one object named "<tenant>/<kind>/<id>"
// (escapeToken, the empty tenant "_"), in the object store's own format,
// so that nats.go's reader and the nats CLI read them.
const (
	snapshotsBucket = "agentgate_snapshots"
	snapshotChunk   = 128 << 10
	// maxSnapshotMeta bounds the metadata stored with a snapshot: it
	// travels in one message with the object's record.
	maxSnapshotMeta = 16 << 10
	// maxSnapshotID bounds a snapshot's id, and each part of a session
	// lock's key, before escaping.
	maxSnapshotID = 256
	// snapshotReadFor bounds the read of a snapshot opened with a ctx
	// without a deadline: nats.go would bound it to the store's Timeout,
	// too short for a large one.
	snapshotReadFor = time.Hour
	// DefaultSnapshotTenantBytes is Options.SnapshotTenantBytes' default.
	DefaultSnapshotTenantBytes = 10 << 30
)

var _ runs.Snapshots = (*Store)(nil)

func (s *Store) openSnapshots(ctx context.Context, opts Options) error {
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      snapshotsBucket,
		Description: "agentgate workspaces and sessions' state",
		TTL:         opts.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
	}
	err := s.ensure(ctx, "create object store "+snapshotsBucket, func(ctx context.Context) error {
		var err error
		s.snaps, err = s.js.CreateOrUpdateObjectStore(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("object store %s: %w", snapshotsBucket, err)
	}
	return nil
}

// escapeToken keeps ASCII letters, digits and '-' and writes every other
// byte as "=XX". The result holds no '/', '.' or lone '_', so a name or
// key made of escaped parts splits back into them: no part can reach
// into another's place.
func escapeToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "=%02X", c)
	}
	return b.String()
}

// tenantToken is the tenant's part of a name: "_" for the empty tenant,
// which no escaped name can be.
func tenantToken(tenant string) string {
	if tenant == "" {
		return "_"
	}
	return escapeToken(tenant)
}

// snapshotName is the object's name of key.
func snapshotName(key runs.SnapshotKey) (string, error) {
	switch key.Kind {
	case runs.SnapshotWorkspace, runs.SnapshotSession, runs.SnapshotPatch, runs.SnapshotResult:
	default:
		return "", runs.Invalid("kind", fmt.Sprintf("unknown snapshot kind %q", key.Kind))
	}
	if err := checkPart("id", key.ID); err != nil {
		return "", err
	}
	if len(key.Tenant) > maxSnapshotID {
		return "", runs.Invalid("tenant", fmt.Sprintf("longer than %d bytes", maxSnapshotID))
	}
	return tenantToken(key.Tenant) + "/" + string(key.Kind) + "/" + escapeToken(key.ID), nil
}

func checkPart(field, v string) error {
	if v == "" {
		return runs.Invalid(field, "empty")
	}
	if len(v) > maxSnapshotID {
		return runs.Invalid(field, fmt.Sprintf("longer than %d bytes", maxSnapshotID))
	}
	return nil
}

// PutSnapshot stores what r yields under key. It writes the object's
// chunks under a subject of their own, waits until every one is stored,
// and only then its record, which is what makes it visible and replaces
// the one before in one message; the old chunks are purged after. nats.go's
// ObjectStore.Put is not used: it sends the record before the chunks'
// acks are in, so a chunk lost in an election leaves a record of a broken
// object, with the old one's record gone. A chunk or record whose ack is
// lost is sent again with the same Nats-Msg-Id, which the stream drops as
// a duplicate. Two puts of one key at once both succeed and the later
// record wins; a reader of the old version while it is replaced may fail.
func (s *Store) PutSnapshot(ctx context.Context, key runs.SnapshotKey, r io.Reader, most int64, meta map[string]string) (runs.SnapshotInfo, error) {
	name, err := snapshotName(key)
	if err != nil {
		return runs.SnapshotInfo{}, err
	}
	if err := checkSnapshotArgs(most, meta); err != nil {
		return runs.SnapshotInfo{}, err
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	limit, bound, err := s.snapshotLimit(ctx, key.Tenant, name, most)
	if err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("put snapshot %s: %w", name, err)
	}
	info, err := s.writeSnapshot(ctx, name, &boundedReader{r: r, left: limit}, meta)
	if errors.Is(err, errPastBound) {
		return runs.SnapshotInfo{}, fmt.Errorf("put snapshot %s: more than %s: %w", name, bound, runs.ErrSnapshotTooLarge)
	}
	if err != nil {
		return runs.SnapshotInfo{}, fmt.Errorf("put snapshot %s: %w", name, err)
	}
	return snapshotInfo(info), nil
}

func checkSnapshotArgs(most int64, meta map[string]string) error {
	if most < 0 {
		return runs.Invalid("max", "negative")
	}
	n := 0
	for k, v := range meta {
		n += len(k) + len(v)
	}
	if n > maxSnapshotMeta {
		return runs.Invalid("meta", fmt.Sprintf("%d bytes, more than %d", n, maxSnapshotMeta))
	}
	return nil
}

// snapshotLimit is how many bytes the snapshot name of tenant may hold:
// max, or less when the tenant's other snapshots leave less of its
// bound, and the bound that limits, for the error. The check is not
// atomic: puts of one tenant at once may together pass its bound by
// what they store.
func (s *Store) snapshotLimit(ctx context.Context, tenant, name string, most int64) (int64, string, error) {
	bound := fmt.Sprintf("the snapshot's bound of %d bytes", most)
	if s.snapTenantBytes < 0 {
		return most, bound, nil
	}
	used, err := s.snapshotUsage(ctx, tenant, name)
	if err != nil {
		return 0, "", err
	}
	if left := s.snapTenantBytes - used; left < most {
		return max(left, -1), fmt.Sprintf("the tenant's bound of %d bytes for all its snapshots (%d in its others)", s.snapTenantBytes, used), nil
	}
	return most, bound, nil
}

// errPastBound is a boundedReader's: its reader yields more than allowed.
var errPastBound = errors.New("past the bound")

// boundedReader fails with errPastBound once r yields more than left
// bytes; a negative left fails at once.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errPastBound
	}
	// One byte more than allowed tells a reader at its end from one past it.
	p = p[:min(int64(len(p)), b.left+1)]
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errPastBound
	}
	return n, err
}

// writeSnapshot stores r's chunks, then the record of name that points at
// them, then purges the chunks of the version it replaced. On a failure
// before the record it purges what it stored; the old version stays.
func (s *Store) writeSnapshot(ctx context.Context, name string, r io.Reader, meta map[string]string) (*jetstream.ObjectInfo, error) {
	nuid, err := newNUID()
	if err != nil {
		return nil, err
	}
	info := &jetstream.ObjectInfo{
		ObjectMeta: jetstream.ObjectMeta{Name: name, Metadata: meta, Opts: &jetstream.ObjectMetaOptions{ChunkSize: snapshotChunk}},
		Bucket:     snapshotsBucket,
		NUID:       nuid,
	}
	if err := s.writeChunks(ctx, info, r); err != nil {
		s.purgeChunks(ctx, nuid)
		return nil, err
	}
	old, err := s.snapshotRecord(ctx, name)
	if err != nil {
		s.purgeChunks(ctx, nuid)
		return nil, err
	}
	if err := s.writeRecord(ctx, info); err != nil {
		// The record may be stored with its ack lost: the chunks stay.
		return nil, err
	}
	if old != nil && !old.Deleted && old.NUID != nuid {
		s.purgeChunks(ctx, old.NUID)
	}
	info.ModTime = time.Now().UTC()
	return info, nil
}

func newNUID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("snapshot id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// writeChunks publishes r in chunks on info's chunk subject, each once
// stored, filling in info's size, chunk count and digest.
func (s *Store) writeChunks(ctx context.Context, info *jetstream.ObjectInfo, r io.Reader) error {
	subject := fmt.Sprintf("$O.%s.C.%s", snapshotsBucket, info.NUID)
	buf := make([]byte, snapshotChunk)
	h := sha256.New()
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			id := info.NUID + "." + strconv.FormatUint(uint64(info.Chunks), 10)
			if err := s.publishOnce(ctx, &nats.Msg{Subject: subject, Data: buf[:n]}, id); err != nil {
				return err
			}
			h.Write(buf[:n])
			info.Chunks++
			info.Size += uint64(n)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			info.Digest = jetstream.GetObjectDigestValue(h)
			return nil
		}
		if err != nil {
			return fmt.Errorf("read snapshot: %w", err)
		}
	}
}

// writeRecord publishes info as its object's record, replacing the one
// before (a rollup of the record's subject).
func (s *Store) writeRecord(ctx context.Context, info *jetstream.ObjectInfo) error {
	data, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encode snapshot record: %w", err)
	}
	m := nats.NewMsg(fmt.Sprintf("$O.%s.M.%s", snapshotsBucket, encodeObjectName(info.Name)))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = data
	return s.publishOnce(ctx, m, info.NUID+".record")
}

// encodeObjectName is the token of an object's record subject, as the
// object store makes it (nats.go's encodeName).
func encodeObjectName(name string) string {
	return base64.URLEncoding.EncodeToString([]byte(name))
}

// publishOnce publishes m, retrying transient failures with the same
// message id, so that one stored with its ack lost is not stored twice.
func (s *Store) publishOnce(ctx context.Context, m *nats.Msg, id string) error {
	return s.ensure(ctx, "put snapshot", func(ctx context.Context) error {
		_, err := s.js.PublishMsg(ctx, m, jetstream.WithMsgID(id))
		return err
	})
}

// purgeChunks removes the chunks of version nuid, on its own deadline
// (ctx may be what ended): a failure leaves them to the bucket's TTL.
func (s *Store) purgeChunks(ctx context.Context, nuid string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout)
	defer cancel()
	subject := fmt.Sprintf("$O.%s.C.%s", snapshotsBucket, nuid)
	stream, err := s.js.Stream(ctx, "OBJ_"+snapshotsBucket)
	if err == nil {
		err = stream.Purge(ctx, jetstream.WithPurgeSubject(subject))
	}
	if err != nil {
		s.log.Warn("snapshot chunks not purged", zap.String("subject", subject), zap.Error(err))
	}
}

// snapshotRecord is name's record, a deleted one included, or nil.
func (s *Store) snapshotRecord(ctx context.Context, name string) (*jetstream.ObjectInfo, error) {
	var info *jetstream.ObjectInfo
	err := s.retry(ctx, "read snapshot", func(ctx context.Context) error {
		var err error
		info, err = s.snaps.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			info, err = nil, nil
		}
		return err
	})
	return info, err
}

func snapshotInfo(info *jetstream.ObjectInfo) runs.SnapshotInfo {
	return runs.SnapshotInfo{Size: int64(info.Size), Modified: info.ModTime, Meta: info.Metadata}
}

// OpenSnapshot returns the snapshot's bytes, read as the caller reads,
// bounded by ctx (by snapshotReadFor when it has no deadline): ctx must
// last until the reader is closed. The reader fails if what it read does
// not match the digest stored. runs.ErrNotFound when there is none.
func (s *Store) OpenSnapshot(ctx context.Context, key runs.SnapshotKey) (io.ReadCloser, runs.SnapshotInfo, error) {
	name, err := snapshotName(key)
	if err != nil {
		return nil, runs.SnapshotInfo{}, fmt.Errorf("snapshot: %w", runs.ErrNotFound)
	}
	var r *snapshotReader
	err = s.retry(ctx, "read snapshot", func(actx context.Context) error {
		var err error
		r, err = s.getSnapshot(ctx, actx, name)
		return notFound(err)
	})
	if err != nil {
		return nil, runs.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	info, err := r.Info()
	if err != nil {
		r.Close()
		return nil, runs.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	return r, snapshotInfo(info), nil
}

// snapshotReader is an object's reader that ends its read's ctx on Close.
type snapshotReader struct {
	jetstream.ObjectResult
	cancel context.CancelFunc
}

func (r *snapshotReader) Close() error {
	err := r.ObjectResult.Close()
	r.cancel()
	return err
}

// getSnapshot opens name for a read bounded by ctx, while the opening is
// bounded by the attempt's actx: a request lost on the way costs one
// attempt, not the whole read's deadline.
func (s *Store) getSnapshot(ctx, actx context.Context, name string) (*snapshotReader, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(snapshotReadFor)
	}
	rctx, cancel := context.WithDeadline(ctx, deadline)
	stop := context.AfterFunc(actx, cancel)
	res, err := s.snaps.Get(rctx, name)
	if !stop() {
		err = errors.Join(err, fmt.Errorf("open snapshot: %w", actx.Err()))
	}
	if err != nil {
		if res != nil {
			res.Close()
		}
		cancel()
		return nil, err
	}
	return &snapshotReader{ObjectResult: res, cancel: cancel}, nil
}

// DeleteSnapshot removes a snapshot, its bytes at once; one that is not
// there is no error.
func (s *Store) DeleteSnapshot(ctx context.Context, key runs.SnapshotKey) error {
	name, err := snapshotName(key)
	if err != nil {
		return nil // no such snapshot can be stored
	}
	ctx, cancel := s.retryCtx(ctx)
	defer cancel()
	err = s.ensure(ctx, "delete snapshot", func(ctx context.Context) error {
		// Delete finds a deleted object too, and deletes it again.
		if _, err := s.snaps.GetInfo(ctx, name); err != nil {
			return notFound(err)
		}
		return notFound(s.snaps.Delete(ctx, name))
	})
	if err != nil && !errors.Is(err, runs.ErrNotFound) {
		return fmt.Errorf("delete snapshot %s: %w", name, err)
	}
	return nil
}

// SnapshotBytes is what every tenant's snapshots hold, in bytes.
func (s *Store) SnapshotBytes(ctx context.Context) (int64, error) {
	list, err := s.listSnapshots(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, info := range list {
		n += int64(info.Size)
	}
	return n, nil
}

// SnapshotUsage is what tenant's snapshots hold, in bytes.
func (s *Store) SnapshotUsage(ctx context.Context, tenant string) (int64, error) {
	return s.snapshotUsage(ctx, tenant, "")
}

// snapshotUsage is what tenant's snapshots other than except hold. It
// lists the records of every tenant's snapshots: the records' subjects
// are encoded names, which a filter of one tenant cannot match.
func (s *Store) snapshotUsage(ctx context.Context, tenant, except string) (int64, error) {
	list, err := s.listSnapshots(ctx)
	if err != nil {
		return 0, err
	}
	prefix := tenantToken(tenant) + "/"
	var n int64
	for _, info := range list {
		if strings.HasPrefix(info.Name, prefix) && info.Name != except {
			n += int64(info.Size)
		}
	}
	return n, nil
}

func (s *Store) listSnapshots(ctx context.Context) ([]*jetstream.ObjectInfo, error) {
	var list []*jetstream.ObjectInfo
	err := s.retry(ctx, "list snapshots", func(ctx context.Context) error {
		var err error
		list, err = s.snaps.List(ctx)
		if errors.Is(err, jetstream.ErrNoObjectsFound) {
			list, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return list, nil
}
