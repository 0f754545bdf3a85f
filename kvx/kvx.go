package kvx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// checkTimeout bounds the read that checks whether a retried write
// landed, when the attempt's context has no deadline.
const checkTimeout = 5 * time.Second

// CreateBucket creates the key-value bucket cfg describes, or updates it
// to cfg if it exists, under the KV_CREATE category (operation "create
// bucket <name>"). Seed 002's KV_CREATE is bucket creation; creating a key
// is a write, see Create.
//
// It has jetstream's CreateOrUpdateKeyValue semantics, which make it safe
// to retry and to call at every service start: an attempt whose reply was
// lost after the bucket was made finds it on the next attempt and leaves
// it as it is. A config the server refuses (an invalid one, a change it
// cannot make) is permanent; cluster unavailability and "JetStream not
// enabled" (a server still starting) are retried.
//
// A nil js fails at once with an error matching ErrInvalidArgument, and
// an invalid bucket name with a permanent *Error wrapping
// jetstream.ErrInvalidBucketName, without an attempt. A failed call
// returns a *retry.Error whose Cause is an *Error.
func CreateBucket(ctx context.Context, mgr *retry.Manager, js jetstream.JetStream, cfg jetstream.KeyValueConfig, opts ...retry.Option) (jetstream.KeyValue, error) {
	if js == nil {
		return nil, invalid("create bucket", cfg.Bucket, "", fmt.Errorf("%w: nil JetStream", ErrInvalidArgument))
	}
	if !validBucket(cfg.Bucket) {
		return nil, invalid("create bucket", cfg.Bucket, "", jetstream.ErrInvalidBucketName)
	}
	return retry.Do(ctx, mgr, categories.KVCreate, "create bucket "+cfg.Bucket, func(actx context.Context) (jetstream.KeyValue, error) {
		kv, err := js.CreateOrUpdateKeyValue(actx, cfg)
		if err != nil {
			return nil, fail("create bucket", cfg.Bucket, "", err)
		}
		return kv, nil
	}, opts...)
}

// check validates the store and key shared by the key operations.
func check(op string, kv jetstream.KeyValue, key string) error {
	if kv == nil {
		return invalid(op, "", key, fmt.Errorf("%w: nil key-value store", ErrInvalidArgument))
	}
	if !validKey(key) {
		return invalid(op, kv.Bucket(), key, jetstream.ErrInvalidKey)
	}
	return nil
}

// Get returns the latest entry of key, under the KV_GET category
// (operation "get <bucket>/<key>").
//
// A missing key (never written, deleted or purged) is an answer, not a
// failure: it is not retried and emits no retry_exhausted event, and Get
// returns a permanent *Error wrapping jetstream.ErrKeyNotFound, for
// errors.Is. Timeouts and other transient errors are retried.
//
// A nil kv or an invalid key fails at once (ErrInvalidArgument,
// jetstream.ErrInvalidKey), without an attempt. Other failures return a
// *retry.Error whose Cause is an *Error.
func Get(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, opts ...retry.Option) (jetstream.KeyValueEntry, error) {
	if err := check("get", kv, key); err != nil {
		return nil, err
	}
	bucket := kv.Bucket()
	missing := false
	e, err := retry.Do(ctx, mgr, categories.KVGet, "get "+bucket+"/"+key, func(actx context.Context) (jetstream.KeyValueEntry, error) {
		e, err := kv.Get(actx, key)
		missing = errors.Is(err, jetstream.ErrKeyNotFound)
		switch {
		case missing:
			return nil, nil
		case err != nil:
			return nil, fail("get", bucket, key, err)
		}
		return e, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	if missing {
		return nil, retry.Permanent(&Error{Op: "get", Bucket: bucket, Key: key, Err: jetstream.ErrKeyNotFound})
	}
	return e, nil
}

// Put sets key to value and returns the new revision, under the KV_PUT
// category (operation "put <bucket>/<key>").
//
// A put is idempotent in effect: when an attempt's ack is lost after the
// value was stored, the retry stores the same value again, which leaves
// the key as intended but adds a revision (visible to watchers and in the
// history). Use Create or Update where revisions matter.
//
// A nil kv or an invalid key fails at once. A failed call returns a
// *retry.Error whose Cause is an *Error.
func Put(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, value []byte, opts ...retry.Option) (uint64, error) {
	if err := check("put", kv, key); err != nil {
		return 0, err
	}
	bucket := kv.Bucket()
	return retry.Do(ctx, mgr, categories.KVPut, "put "+bucket+"/"+key, func(actx context.Context) (uint64, error) {
		rev, err := kv.Put(actx, key, value)
		if err != nil {
			return 0, fail("put", bucket, key, err)
		}
		return rev, nil
	}, opts...)
}

// Create sets key to value only if the key does not exist (or was
// deleted), and returns the new revision, under the KV_PUT category
// (operation "create <bucket>/<key>"): creating a key is a write, and seed
// 002's KV_CREATE is for buckets.
//
// A key that exists is a permanent failure, matching
// jetstream.ErrKeyExists, except after a retry: when an attempt's ack was
// lost after the key was created, the retry finds the key. So on the
// second and later attempts Create reads the key and, when it holds
// exactly value, takes it as its own write and returns its revision.
// Values are the identity: a concurrent writer that created the same key
// with the same bytes in that window is indistinguishable, so give each
// writer a distinct value (an owner id, say) when that matters.
//
// A nil kv or an invalid key fails at once. A failed call returns a
// *retry.Error whose Cause is an *Error.
func Create(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, value []byte, opts ...retry.Option) (uint64, error) {
	if err := check("create", kv, key); err != nil {
		return 0, err
	}
	bucket := kv.Bucket()
	return retry.Do(ctx, mgr, categories.KVPut, "create "+bucket+"/"+key, func(actx context.Context) (uint64, error) {
		rev, err := kv.Create(actx, key, value)
		if err == nil {
			return rev, nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) && retried(actx) {
			rev, ok, cerr := createLanded(actx, kv, key, value)
			switch {
			case cerr != nil:
				return 0, fail("create", bucket, key, cerr)
			case ok:
				return rev, nil
			}
		}
		return 0, fail("create", bucket, key, err)
	}, opts...)
}

// Update sets key to value only if its latest revision is last (a
// compare-and-set), and returns the new revision, under the KV_PUT
// category (operation "update <bucket>/<key>").
//
// Another revision is a permanent failure, matching
// jetstream.ErrKeyRevisionMismatch, except after a retry: when an
// attempt's ack was lost after the update was stored, the retry finds
// the key moved on from last. So on the second and later attempts Update
// reads the key's history and, when the revision that followed last holds
// exactly value, takes it as its own write and returns its revision. When
// the bucket keeps too little history to show the revision that followed
// last, the oldest revision kept decides. As with Create, values are the
// identity.
//
// A nil kv or an invalid key fails at once. A failed call returns a
// *retry.Error whose Cause is an *Error.
func Update(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, value []byte, last uint64, opts ...retry.Option) (uint64, error) {
	if err := check("update", kv, key); err != nil {
		return 0, err
	}
	bucket := kv.Bucket()
	return retry.Do(ctx, mgr, categories.KVPut, "update "+bucket+"/"+key, func(actx context.Context) (uint64, error) {
		rev, err := kv.Update(actx, key, value, last)
		if err == nil {
			return rev, nil
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) && retried(actx) {
			rev, ok, cerr := landedAfter(actx, kv, key, last, func(e jetstream.KeyValueEntry) bool {
				return e.Operation() == jetstream.KeyValuePut && bytes.Equal(e.Value(), value)
			})
			switch {
			case cerr != nil:
				return 0, fail("update", bucket, key, cerr)
			case ok:
				return rev, nil
			}
		}
		return 0, fail("update", bucket, key, err)
	}, opts...)
}

// Delete places a delete marker on key, under the KV_DELETE category
// (operation "delete <bucket>/<key>"). Deleting is idempotent: deleting a
// missing or deleted key succeeds, and a retry after a lost ack adds a
// second marker, which changes nothing a reader sees. The key's history
// stays; see jetstream.KeyValue.Purge to drop it.
//
// A nil kv or an invalid key fails at once. A failed call returns a
// *retry.Error whose Cause is an *Error.
func Delete(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, opts ...retry.Option) error {
	if err := check("delete", kv, key); err != nil {
		return err
	}
	bucket := kv.Bucket()
	_, err := retry.Do(ctx, mgr, categories.KVDelete, "delete "+bucket+"/"+key, func(actx context.Context) (struct{}, error) {
		return struct{}{}, fail("delete", bucket, key, kv.Delete(actx, key))
	}, opts...)
	return err
}

// DeleteRevision places a delete marker on key only if its latest
// revision is last (a compare-and-delete), under the KV_DELETE category
// (operation "delete <bucket>/<key>"). last must not be zero.
//
// Another revision is a permanent failure, matching
// jetstream.ErrKeyRevisionMismatch, except after a retry, when the
// revision that followed last being a delete marker counts as this call's
// own delete (see Update).
//
// A nil kv, an invalid key or a zero last fails at once. A failed call
// returns a *retry.Error whose Cause is an *Error.
func DeleteRevision(ctx context.Context, mgr *retry.Manager, kv jetstream.KeyValue, key string, last uint64, opts ...retry.Option) error {
	if err := check("delete", kv, key); err != nil {
		return err
	}
	bucket := kv.Bucket()
	if last == 0 {
		return invalid("delete", bucket, key, fmt.Errorf("%w: zero revision", ErrInvalidArgument))
	}
	_, err := retry.Do(ctx, mgr, categories.KVDelete, "delete "+bucket+"/"+key, func(actx context.Context) (struct{}, error) {
		err := kv.Delete(actx, key, jetstream.LastRevision(last))
		if err == nil {
			return struct{}{}, nil
		}
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) && retried(actx) {
			_, ok, cerr := landedAfter(actx, kv, key, last, func(e jetstream.KeyValueEntry) bool {
				return e.Operation() == jetstream.KeyValueDelete
			})
			switch {
			case cerr != nil:
				return struct{}{}, fail("delete", bucket, key, cerr)
			case ok:
				return struct{}{}, nil
			}
		}
		return struct{}{}, fail("delete", bucket, key, err)
	}, opts...)
	return err
}

// retried reports whether ctx is the context of a second or later attempt
// of retry.Do: only then can an earlier attempt of the same call have
// written.
func retried(ctx context.Context) bool {
	a, ok := retry.AttemptFrom(ctx)
	return ok && a.Number > 1
}

// bounded gives ctx checkTimeout when it has no deadline.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, checkTimeout)
}

// createLanded reports whether key holds exactly value, as it would if an
// earlier attempt's create landed. A missing key reports false. Errors
// other than that are returned, so the attempt is retried if they are
// transient.
func createLanded(ctx context.Context, kv jetstream.KeyValue, key string, value []byte) (uint64, bool, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	e, err := kv.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return e.Revision(), bytes.Equal(e.Value(), value), nil
}

// landedAfter reports whether the revision of key that followed last
// satisfies match, and returns that revision. When the history no longer
// holds last but only later revisions, the oldest kept one decides. A
// missing history, or one with older revisions but not last, reports
// false.
func landedAfter(ctx context.Context, kv jetstream.KeyValue, key string, last uint64, match func(jetstream.KeyValueEntry) bool) (uint64, bool, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	hist, err := kv.History(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	for i, e := range hist {
		if e.Revision() <= last {
			continue
		}
		// e is the first revision after last. It followed last directly
		// if last is the entry before it, or if nothing before it is
		// kept.
		if i > 0 && hist[i-1].Revision() != last {
			return 0, false, nil
		}
		return e.Revision(), match(e), nil
	}
	return 0, false, nil
}

// validKey reports whether key is a valid key, by jetstream's rules: a
// non-empty string of letters, digits and -/_=. that neither starts nor
// ends with a dot and has no empty token.
func validKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '/', c == '_', c == '=':
		case c == '.':
			if key[i+1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// validBucket reports whether name is a valid bucket name: letters,
// digits, - and _.
func validBucket(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}
