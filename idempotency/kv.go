package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/internal/kvcas"
)

// Defaults of KVConfig.
const (
	// DefaultKVBucket is the bucket a KV store uses unless
	// KVConfig.Bucket says otherwise.
	DefaultKVBucket = "JETRETRY_IDEMPOTENCY"
	// DefaultKVTTL is how long records are kept unless KVConfig.TTL says
	// otherwise.
	DefaultKVTTL = 24 * time.Hour
)

// kvHeaderRoom is the room kept in a message for the headers of a KV write
// (the expected-revision header is at most 71 bytes), so that a record that
// passes the size check is never refused by the server.
const kvHeaderRoom = 128

// kvMaxRounds bounds the read-and-decide rounds of one Claim that keeps
// losing races (the key deleted after Create failed, or another writer
// winning the takeover compare-and-set).
const kvMaxRounds = 8

var validBucket = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// KVConfig configures a KV store. The zero value is valid: every field has
// a default. Replicas, TTL, LimitMarkerTTL, MaxValueSize and Storage are
// applied only when NewKV creates the bucket; an existing bucket is used
// as is.
type KVConfig struct {
	// Bucket is the name of the KV bucket: letters, digits, '-' and '_'.
	// Default DefaultKVBucket ("JETRETRY_IDEMPOTENCY").
	Bucket string
	// Replicas is the number of replicas of the bucket, 1 to 5. Default 1;
	// use 3 on a cluster.
	Replicas int
	// TTL is how long a record is kept after its last write: the bucket's
	// MaxAge. Default DefaultKVTTL (24h). A completed result is served for
	// this long; it must be much longer than any lease. Leases are not
	// enforced by TTLs but by the record's lease_until (a write resets a
	// key's age).
	TTL time.Duration
	// LimitMarkerTTL is how long the bucket keeps a marker when a record
	// expires, so that watchers see the expiry (the bucket's
	// SubjectDeleteMarkerTTL; it needs nats-server 2.11 or later). Default
	// 0: no markers.
	LimitMarkerTTL time.Duration
	// MaxValueSize is the largest record in bytes the bucket accepts, which
	// bounds results. Default 0: no bucket limit, so the connection's max
	// payload bounds them.
	MaxValueSize int32
	// Storage is the bucket's storage. Default jetstream.FileStorage (the
	// zero value).
	Storage jetstream.StorageType
	// Claim chooses how Claim looks for an existing record. Creating
	// first costs a new key two round trips in all (create, complete) and a
	// duplicate (a cached hit, a live claim) two; reading first costs a
	// duplicate one and a new key three. Default ClaimAdaptive: read first
	// while most recent claims found an existing record.
	Claim ClaimMode
	// Now is the clock that leases are set and enforced by: a claim is
	// live while Now is before its record's lease_until. If nil, time.Now
	// is used. Processes sharing a bucket need clocks that agree to well
	// within a lease.
	Now func() time.Time
}

// ClaimMode is how KV.Claim looks for an existing record; see
// KVConfig.Claim.
type ClaimMode uint8

// Claim modes.
const (
	// ClaimAdaptive reads first while more than half of the recent claims
	// (an exponential average over about the last 16) found an existing
	// record, and creates first otherwise.
	ClaimAdaptive ClaimMode = iota
	// ClaimCreateFirst always tries to create the record first.
	ClaimCreateFirst
	// ClaimReadFirst always reads the key first.
	ClaimReadFirst
)

// withDefaults returns c with defaults filled in, or an error wrapping
// ErrInvalidConfig.
func (c KVConfig) withDefaults() (KVConfig, error) {
	if c.Bucket == "" {
		c.Bucket = DefaultKVBucket
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.TTL == 0 {
		c.TTL = DefaultKVTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case !validBucket.MatchString(c.Bucket):
		return c, fmt.Errorf("%w: bucket name %q: use letters, digits, '-' and '_'", ErrInvalidConfig, c.Bucket)
	case c.Replicas < 1 || c.Replicas > 5:
		return c, fmt.Errorf("%w: replicas must be 1 to 5, got %d", ErrInvalidConfig, c.Replicas)
	case c.TTL < 0:
		return c, fmt.Errorf("%w: negative TTL %v", ErrInvalidConfig, c.TTL)
	case c.LimitMarkerTTL < 0:
		return c, fmt.Errorf("%w: negative limit marker TTL %v", ErrInvalidConfig, c.LimitMarkerTTL)
	case c.LimitMarkerTTL > 0 && c.LimitMarkerTTL < time.Second:
		return c, fmt.Errorf("%w: limit marker TTL must be at least 1s, got %v", ErrInvalidConfig, c.LimitMarkerTTL)
	case c.Claim > ClaimReadFirst:
		return c, fmt.Errorf("%w: unknown claim mode %d", ErrInvalidConfig, c.Claim)
	case c.MaxValueSize < 0:
		return c, fmt.Errorf("%w: negative max value size %d", ErrInvalidConfig, c.MaxValueSize)
	case c.MaxValueSize > 0 && c.MaxValueSize <= kvHeaderRoom+256:
		return c, fmt.Errorf("%w: max value size %d is too small for a record", ErrInvalidConfig, c.MaxValueSize)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return c, fmt.Errorf("%w: unknown storage type %d", ErrInvalidConfig, c.Storage)
	}
	return c, nil
}

// KV is a Store on a JetStream KV bucket: records are durable, and shared
// by every process that uses the bucket. Each key holds one JSON record
// (see the package doc). A claim is a KV Create; takeover, renewal and
// completion are compare-and-set Updates on the revision the claim holds,
// and release is a Delete on that revision. Decisions come from those
// compare-and-set results, never from a read that follows a write.
//
// Errors from JetStream other than the outcomes above (no servers, a
// closed connection, timeouts, no responders, JetStream disabled, or any
// other server error) wrap ErrUnavailable and keep the cause. Operations
// are bounded by their ctx; without a deadline, the JetStream context's
// default timeout applies (5 s unless set with
// jetstream.WithDefaultTimeout). A write that timed out during an outage
// may still land when the connection comes back (the client buffers it):
// compare-and-set keeps that safe, but a Claim refused as unavailable can
// leave a claim nobody holds, which blocks the key until its lease ends.
//
// KV is safe for concurrent use by many goroutines. Build it with NewKV.
type KV struct {
	kv        jetstream.KeyValue
	nc        *nats.Conn
	now       func() time.Time
	bucketMax int // the bucket's max value size; 0 for none
	mode      ClaimMode
	// dups is an exponential average of how often a claim found an
	// existing record, scaled to 0..dupScale (ClaimAdaptive).
	dups atomic.Int64

	// held caches, by owner, what an owned claim's later writes must carry
	// over from its record, so that they need no read.
	mu   sync.Mutex
	held map[string]heldClaim
}

// heldClaim is what Renew, Complete and Fail copy from the claimed record.
type heldClaim struct {
	fingerprint string
	createdAt   time.Time
	leaseUntil  time.Time
}

// kvHeldPrune is the size of the held cache above which claims whose
// lease has ended are dropped from it. Dropping is always safe: a claim
// missing from the cache is read back from its record.
const kvHeldPrune = 1024

var (
	_ Store  = (*KV)(nil)
	_ Waiter = (*KV)(nil)
)

// NewKV returns a KV store on the bucket cfg names, creating the bucket
// with cfg's settings if it does not exist; an existing bucket is used as
// is. It returns an error wrapping ErrInvalidConfig for a nil js or a bad
// config, and one wrapping ErrUnavailable when JetStream cannot be reached.
func NewKV(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KV, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	bucket, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:         cfg.Bucket,
		Description:    "jetretry idempotency records",
		TTL:            cfg.TTL,
		Replicas:       cfg.Replicas,
		Storage:        cfg.Storage,
		MaxValueSize:   cfg.MaxValueSize,
		LimitMarkerTTL: cfg.LimitMarkerTTL,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		bucket, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, setupErr(ctx, cfg.Bucket, err)
	}
	st, err := bucket.Status(ctx)
	if err != nil {
		return nil, setupErr(ctx, cfg.Bucket, err)
	}
	k := &KV{kv: bucket, nc: js.Conn(), now: cfg.Now, mode: cfg.Claim, held: make(map[string]heldClaim)}
	if m := st.Config().MaxValueSize; m > 0 {
		k.bucketMax = int(m)
	}
	return k, nil
}

// setupErr classifies an error of bucket setup: a server that answered
// with an error (bad settings for this server) is not unavailable.
func setupErr(ctx context.Context, bucket string, err error) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code != 503 && !errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return fmt.Errorf("idempotency: bucket %s: %w", bucket, err)
	}
	return opErr(ctx, "open bucket", bucket, err)
}

// opErr wraps an unexpected error of a KV operation: in ErrUnavailable,
// unless the caller cancelled ctx.
func opErr(ctx context.Context, op, key string, err error) error {
	cerr := ctx.Err()
	if cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(cerr, context.Canceled) {
		return fmt.Errorf("idempotency: %s %s: %w", op, key, err)
	}
	return fmt.Errorf("idempotency: %s %s: %w: %w", op, key, ErrUnavailable, err)
}

// isConflict reports whether err is a compare-and-set conflict.
func isConflict(err error) bool { return kvcas.IsConflict(err) }

// isTooLarge reports whether err says a message was too large.
func isTooLarge(err error) bool {
	return errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum)
}

// Bucket returns the name of the KV bucket.
func (k *KV) Bucket() string { return k.kv.Bucket() }

// MaxRecordSize returns the size in bytes of the largest record the store
// writes: the smaller of the bucket's max value size and the connection's
// max payload, less room for headers. Complete refuses larger records with
// a *ResultTooLargeError.
func (k *KV) MaxRecordSize() int {
	limit := math.MaxInt
	if p := k.nc.MaxPayload(); p > 0 && p < int64(limit) {
		limit = int(p)
	}
	if k.bucketMax > 0 && k.bucketMax < limit {
		limit = k.bucketMax
	}
	return limit - kvHeaderRoom
}

// Claim implements Store. It claims a free key with a KV Create. When the
// key exists it reads the record and decides: ErrKeyReuse for another
// fingerprint, Completed or Failed for a finished record, ErrInProgress
// for a live claim, and a takeover by compare-and-set for an expired one.
// A lost race is decided again, up to a bound after which it returns
// ErrInProgress. It returns a *CorruptRecordError (ErrCorrupt) for a
// record it cannot decode, ErrInvalidKey for a bad key, and an error
// wrapping ErrUnavailable when JetStream cannot be reached.
func (k *KV) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	if !ValidKey(key) {
		return Claim{}, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	if lease <= 0 {
		return Claim{}, fmt.Errorf("idempotency: lease must be positive, got %v", lease)
	}
	var owner string
	// newRecord encodes the in-progress record of a new claim by us. It is
	// built only when a write needs it: a hit read first costs no encoding.
	newRecord := func() (kvRecord, []byte, error) {
		if owner == "" {
			o, err := newOwner()
			if err != nil {
				return kvRecord{}, nil, err
			}
			owner = o
		}
		now := k.now()
		rec := kvRecord{
			State: StateInProgress, Owner: owner, LeaseUntil: now.Add(lease),
			Fingerprint: fingerprint, CreatedAt: now, UpdatedAt: now,
		}
		b, err := rec.encode()
		return rec, b, err
	}
	claimed := func(status Status, rec kvRecord, rev uint64, prev string) Claim {
		k.noteDuplicate(status != Claimed)
		k.hold(owner, heldClaim{fingerprint: fingerprint, createdAt: rec.CreatedAt, leaseUntil: rec.LeaseUntil})
		return Claim{Key: key, Status: status, Owner: owner, LeaseUntil: rec.LeaseUntil, PreviousOwner: prev, Revision: rev}
	}
	readFirst := k.readFirst()
	for range kvMaxRounds {
		var e jetstream.KeyValueEntry
		var err error
		if readFirst {
			readFirst = false
			e, err = k.kv.Get(ctx, key)
			if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return Claim{}, opErr(ctx, "claim", key, err)
			}
		}
		if e == nil {
			rec, b, err := newRecord()
			if err != nil {
				return Claim{}, err
			}
			// A write expecting no earlier message on the key's subject
			// creates it in one round trip (kv.Create would read the key
			// again on a conflict, to look for a delete marker).
			rev, err := k.kv.Update(ctx, key, b, 0)
			if err == nil {
				return claimed(Claimed, rec, rev, ""), nil
			}
			if !isConflict(err) {
				return Claim{}, opErr(ctx, "claim", key, err)
			}
			e, err = k.kv.Get(ctx, key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				// Released or cleared: a delete marker holds the subject.
				// Create writes over it.
				rev, err := k.kv.Create(ctx, key, b)
				if err == nil {
					return claimed(Claimed, rec, rev, ""), nil
				}
				if !isConflict(err) {
					return Claim{}, opErr(ctx, "claim", key, err)
				}
				continue // created by someone else meanwhile: decide again
			}
			if err != nil {
				return Claim{}, opErr(ctx, "claim", key, err)
			}
		}
		k.noteDuplicate(true)
		cur, err := decodeKVRecord(key, e.Revision(), e.Value())
		if err != nil {
			return Claim{}, err
		}
		if cur.Fingerprint != fingerprint {
			return Claim{}, fmt.Errorf("%w: key %s", ErrKeyReuse, key)
		}
		switch cur.State {
		case StateCompleted:
			return Claim{Key: key, Status: Completed, Result: cur.result(), Revision: e.Revision()}, nil
		case StateFailed:
			return Claim{Key: key, Status: Failed, Failure: cur.Failure, Revision: e.Revision()}, nil
		}
		if k.now().Before(cur.LeaseUntil) {
			return Claim{}, fmt.Errorf("%w: key %s owned by %s until %s", ErrInProgress, key, cur.Owner, cur.LeaseUntil.UTC().Format(time.RFC3339Nano))
		}
		// An orphan: take it over if nobody wrote since we read it.
		rec, _, err := newRecord()
		if err != nil {
			return Claim{}, err
		}
		rec.CreatedAt = cur.CreatedAt
		b, err := rec.encode()
		if err != nil {
			return Claim{}, err
		}
		rev, err := k.kv.Update(ctx, key, b, e.Revision())
		if err == nil {
			return claimed(TakenOver, rec, rev, cur.Owner), nil
		}
		if !isConflict(err) {
			return Claim{}, opErr(ctx, "take over", key, err)
		}
		// Another writer won the race: decide again from what it wrote.
	}
	return Claim{}, fmt.Errorf("%w: key %s: lost %d races for it", ErrInProgress, key, kvMaxRounds)
}

// dupScale is the fixed-point scale of KV.dups.
const dupScale = 1 << 10

// readFirst reports whether Claim should read the key before creating it.
func (k *KV) readFirst() bool {
	switch k.mode {
	case ClaimReadFirst:
		return true
	case ClaimCreateFirst:
		return false
	}
	return k.dups.Load() > dupScale/2
}

// noteDuplicate updates the average of claims that found a record. Lost
// updates under concurrency only blur an average, so a plain load and
// store suffice.
func (k *KV) noteDuplicate(found bool) {
	d := k.dups.Load()
	if found {
		d += (dupScale - d) / 16
	} else {
		d -= d / 16
	}
	k.dups.Store(d)
}

// hold remembers what an owned claim's later writes carry over. Claims
// that are never ended (their owner gave up on an unreachable store) are
// pruned once their lease has passed.
func (k *KV) hold(owner string, h heldClaim) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.held) >= kvHeldPrune {
		now := k.now()
		for o, c := range k.held {
			if !now.Before(c.leaseUntil) {
				delete(k.held, o)
			}
		}
	}
	k.held[owner] = h
}

// drop forgets an owner whose claim ended.
func (k *KV) drop(owner string) {
	k.mu.Lock()
	delete(k.held, owner)
	k.mu.Unlock()
}

// heldRecord returns what the owned claim c carries over: from the cache
// when this store made the claim, else from the record, which must still
// be c's.
func (k *KV) heldRecord(ctx context.Context, c Claim) (heldClaim, error) {
	if !c.Owned() {
		return heldClaim{}, fmt.Errorf("idempotency: claim of %s with status %s is not owned", c.Key, c.Status)
	}
	k.mu.Lock()
	h, ok := k.held[c.Owner]
	k.mu.Unlock()
	if ok {
		return h, nil
	}
	e, err := k.kv.Get(ctx, c.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return heldClaim{}, fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	if err != nil {
		return heldClaim{}, opErr(ctx, "read", c.Key, err)
	}
	if e.Revision() != c.Revision {
		return heldClaim{}, fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	cur, err := decodeKVRecord(c.Key, e.Revision(), e.Value())
	if err != nil {
		return heldClaim{}, err
	}
	if cur.State != StateInProgress || cur.Owner != c.Owner {
		return heldClaim{}, fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	return heldClaim{fingerprint: cur.Fingerprint, createdAt: cur.CreatedAt, leaseUntil: cur.LeaseUntil}, nil
}

// write replaces the record of the owned claim c by compare-and-set on its
// revision.
func (k *KV) write(ctx context.Context, op string, c Claim, b []byte) (uint64, error) {
	rev, err := k.kv.Update(ctx, c.Key, b, c.Revision)
	switch {
	case err == nil:
		return rev, nil
	case isConflict(err), errors.Is(err, jetstream.ErrKeyNotFound):
		k.drop(c.Owner)
		return 0, fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	return 0, opErr(ctx, op, c.Key, err)
}

// Renew implements Store: a compare-and-set of the record with a new
// lease_until. It returns ErrLeaseLost when the record has changed since
// c's revision, and an error wrapping ErrUnavailable when JetStream cannot
// be reached.
func (k *KV) Renew(ctx context.Context, c *Claim, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("idempotency: lease must be positive, got %v", lease)
	}
	h, err := k.heldRecord(ctx, *c)
	if err != nil {
		return err
	}
	now := k.now()
	rec := kvRecord{
		State: StateInProgress, Owner: c.Owner, LeaseUntil: now.Add(lease),
		Fingerprint: h.fingerprint, CreatedAt: h.createdAt, UpdatedAt: now,
	}
	b, err := rec.encode()
	if err != nil {
		return err
	}
	rev, err := k.write(ctx, "renew", *c, b)
	if err != nil {
		return err
	}
	h.leaseUntil = rec.LeaseUntil
	k.hold(c.Owner, h)
	c.LeaseUntil, c.Revision = rec.LeaseUntil, rev
	return nil
}

// Complete implements Store: a compare-and-set of the record to completed
// with the result, which must be valid JSON. It returns a
// *ResultTooLargeError (ErrResultTooLarge), without writing, when the
// record would exceed MaxRecordSize; ErrLeaseLost when the record has
// changed since c's revision; and an error wrapping ErrUnavailable when
// JetStream cannot be reached.
func (k *KV) Complete(ctx context.Context, c Claim, result []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(result) > 0 && !json.Valid(result) {
		return fmt.Errorf("idempotency: result of key %s is not valid JSON", c.Key)
	}
	return k.finish(ctx, c, kvRecord{State: StateCompleted, Result: result})
}

// Fail implements Store: a compare-and-set of the record to failed with
// the message. It returns ErrLeaseLost when the record has changed since
// c's revision, and an error wrapping ErrUnavailable when JetStream cannot
// be reached.
func (k *KV) Fail(ctx context.Context, c Claim, message string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return k.finish(ctx, c, kvRecord{State: StateFailed, Failure: message})
}

func (k *KV) finish(ctx context.Context, c Claim, rec kvRecord) error {
	h, err := k.heldRecord(ctx, c)
	if err != nil {
		return err
	}
	rec.Fingerprint, rec.CreatedAt, rec.UpdatedAt = h.fingerprint, h.createdAt, k.now()
	b, err := rec.encode()
	if err != nil {
		return err
	}
	if max := k.MaxRecordSize(); len(b) > max {
		return &ResultTooLargeError{Key: c.Key, Size: len(b), Max: max}
	}
	if _, err := k.write(ctx, string(rec.State), c, b); err != nil {
		if isTooLarge(err) {
			return &ResultTooLargeError{Key: c.Key, Size: len(b), Max: k.MaxRecordSize()}
		}
		return err
	}
	k.drop(c.Owner)
	return nil
}

// Release implements Store: a Delete of the record on c's revision. It
// returns ErrLeaseLost when the record has changed since, and an error
// wrapping ErrUnavailable when JetStream cannot be reached.
func (k *KV) Release(ctx context.Context, c Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !c.Owned() {
		return fmt.Errorf("idempotency: claim of %s with status %s is not owned", c.Key, c.Status)
	}
	err := k.kv.Delete(ctx, c.Key, jetstream.LastRevision(c.Revision))
	switch {
	case err == nil:
		k.drop(c.Owner)
		return nil
	case isConflict(err):
		k.drop(c.Owner)
		return fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	return opErr(ctx, "release", c.Key, err)
}

// Get implements Store. It returns ErrNotFound when the key has no record,
// a *CorruptRecordError (ErrCorrupt) when the record cannot be decoded,
// ErrInvalidKey for a bad key and an error wrapping ErrUnavailable when
// JetStream cannot be reached.
func (k *KV) Get(ctx context.Context, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	if !ValidKey(key) {
		return Record{}, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	e, err := k.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	if err != nil {
		return Record{}, opErr(ctx, "get", key, err)
	}
	rec, err := decodeKVRecord(key, e.Revision(), e.Value())
	if err != nil {
		return Record{}, err
	}
	return rec.record(key, e.Revision()), nil
}

// Clear implements Store: it deletes the record whatever its state, a
// corrupt one included. It returns ErrNotFound when there is none,
// ErrInvalidKey for a bad key and an error wrapping ErrUnavailable when
// JetStream cannot be reached.
func (k *KV) Clear(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ValidKey(key) {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	if _, err := k.kv.Get(ctx, key); err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("%w: key %s", ErrNotFound, key)
		}
		return opErr(ctx, "clear", key, err)
	}
	if err := k.kv.Delete(ctx, key); err != nil {
		return opErr(ctx, "clear", key, err)
	}
	return nil
}
