package test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/kvx"
	"github.com/jetretry/jetretry/retry"
)

// interceptKV wraps a KeyValue so that tests can inject faults. hook, when
// set, runs instead of each counted call with the operation name, the
// 1-based call number of that operation and the real call.
type interceptKV struct {
	jetstream.KeyValue

	mu    sync.Mutex
	calls map[string]int
	hook  func(op string, call int, real func() (uint64, error)) (uint64, error)
}

func (k *interceptKV) run(op string, real func() (uint64, error)) (uint64, error) {
	k.mu.Lock()
	if k.calls == nil {
		k.calls = make(map[string]int)
	}
	k.calls[op]++
	n := k.calls[op]
	k.mu.Unlock()
	if k.hook == nil {
		return real()
	}
	return k.hook(op, n, real)
}

func (k *interceptKV) count(op string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[op]
}

func (k *interceptKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	var e jetstream.KeyValueEntry
	_, err := k.run("get", func() (uint64, error) {
		var err error
		e, err = k.KeyValue.Get(ctx, key)
		return 0, err
	})
	return e, err
}

func (k *interceptKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	return k.run("put", func() (uint64, error) { return k.KeyValue.Put(ctx, key, value) })
}

func (k *interceptKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	return k.run("create", func() (uint64, error) { return k.KeyValue.Create(ctx, key, value, opts...) })
}

func (k *interceptKV) Update(ctx context.Context, key string, value []byte, last uint64) (uint64, error) {
	return k.run("update", func() (uint64, error) { return k.KeyValue.Update(ctx, key, value, last) })
}

func (k *interceptKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	_, err := k.run("delete", func() (uint64, error) { return 0, k.KeyValue.Delete(ctx, key, opts...) })
	return err
}

// loseAck returns a hook that runs the real call of op and, on its first
// call, reports a timeout whatever happened: the write landed but its ack
// was lost. before, if set, runs after the real call and before the
// timeout is reported, as another writer would.
func loseAck(t *testing.T, op string, before func()) func(string, int, func() (uint64, error)) (uint64, error) {
	return func(o string, call int, real func() (uint64, error)) (uint64, error) {
		rev, err := real()
		if o == op && call == 1 {
			require.NoError(t, err, "the first %s lands", op)
			if before != nil {
				before()
			}
			return 0, nats.ErrTimeout
		}
		return rev, err
	}
}

// newBucket creates a bucket through kvx and returns it with a fresh
// manager and audit memory.
func newBucket(t *testing.T, js jetstream.JetStream, name string, history uint8) (jetstream.KeyValue, *retry.Manager, *audit.Memory) {
	t.Helper()
	mgr, mem := fastManager(t, nil)
	kv, err := kvx.CreateBucket(testCtx(t), mgr, js, jetstream.KeyValueConfig{Bucket: name, History: history})
	require.NoError(t, err)
	return kv, mgr, mem
}

func TestKVXCreateBucket(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := testCtx(t)
	mgr, mem := fastManager(t, nil)

	kv, err := kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "settings", History: 3})
	require.NoError(t, err)
	require.Equal(t, "settings", kv.Bucket())

	// Declaring it again, or with a changed config, is fine.
	_, err = kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "settings", History: 3})
	require.NoError(t, err)
	kv, err = kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "settings", History: 5})
	require.NoError(t, err)
	st, err := kv.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(5), st.History())
	require.Zero(t, mem.Len())

	// Bad arguments fail without an attempt.
	_, err = kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "bad.name"})
	require.ErrorIs(t, err, jetstream.ErrInvalidBucketName)
	require.True(t, retry.IsPermanent(err))
	_, err = kvx.CreateBucket(ctx, mgr, nil, jetstream.KeyValueConfig{Bucket: "x"})
	require.ErrorIs(t, err, kvx.ErrInvalidArgument)
	require.Zero(t, mem.Len())

	// A config the server refuses is permanent: history above 64.
	_, err = kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "deep", History: 65})
	require.ErrorIs(t, err, jetstream.ErrHistoryTooLarge)
	requireRetryError(t, err, retry.StopPermanent, 1)
	requireExhaustedEvent(t, mem, categories.KVCreate, "permanent", 1, "jetstream.ErrHistoryTooLarge")
}

func TestKVXCreateBucketWithoutJetStreamIsRetried(t *testing.T) {
	// A server without JetStream answers like one still starting up.
	s := natstest.Start(t, func(o *server.Options) { o.JetStream = false })
	_, js := s.JetStream(t)
	mgr, mem := fastManager(t, nil)
	_, err := kvx.CreateBucket(testCtx(t), mgr, js, jetstream.KeyValueConfig{Bucket: "b"})
	require.ErrorIs(t, err, jetstream.ErrJetStreamNotEnabled)
	requireRetryError(t, err, retry.StopExhausted, 2) // seed 002: KV_CREATE has 2 attempts
	require.Len(t, eventsOf(mem, audit.TypeRetryAttempt), 1)
	requireExhaustedEvent(t, mem, categories.KVCreate, "exhausted", 2, "jetstream.ErrJetStreamNotEnabled")
}

func TestKVXGet(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	raw, mgr, mem := newBucket(t, js, "get", 1)
	ctx := testCtx(t)

	t.Run("missing key is an answer", func(t *testing.T) {
		mem.Reset()
		kv := &interceptKV{KeyValue: raw}
		e, err := kvx.Get(ctx, mgr, kv, "absent")
		require.Nil(t, e)
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
		require.True(t, retry.IsPermanent(err))
		var ke *kvx.Error
		require.ErrorAs(t, err, &ke)
		require.Equal(t, "kvx: get get/absent: nats: key not found", ke.Error())
		require.Equal(t, 1, kv.count("get"), "not retried")
		require.Zero(t, mem.Len(), "no retry_exhausted for a miss")
	})

	t.Run("deleted key is missing", func(t *testing.T) {
		_, err := raw.Put(ctx, "gone", []byte("x"))
		require.NoError(t, err)
		require.NoError(t, raw.Delete(ctx, "gone"))
		_, err = kvx.Get(ctx, mgr, raw, "gone")
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
	})

	t.Run("a timeout is retried", func(t *testing.T) {
		mem.Reset()
		rev, err := raw.Put(ctx, "k", []byte("v"))
		require.NoError(t, err)
		kv := &interceptKV{KeyValue: raw, hook: func(op string, call int, real func() (uint64, error)) (uint64, error) {
			if call == 1 {
				return 0, nats.ErrTimeout
			}
			return real()
		}}
		e, err := kvx.Get(ctx, mgr, kv, "k", retry.WithTenant("t1"))
		require.NoError(t, err)
		require.Equal(t, "v", string(e.Value()))
		require.Equal(t, rev, e.Revision())
		require.Equal(t, 2, kv.count("get"))
		attempts := eventsOf(mem, audit.TypeRetryAttempt)
		require.Len(t, attempts, 1)
		require.Equal(t, string(categories.KVGet), attempts[0].Category)
		require.Equal(t, "get get/k", attempts[0].Operation)
		require.Equal(t, "nats.ErrTimeout", attempts[0].ExceptionType)
		require.Equal(t, "t1", attempts[0].TenantID)
	})

	t.Run("persistent timeouts exhaust seed 002's three attempts", func(t *testing.T) {
		mem.Reset()
		kv := &interceptKV{KeyValue: raw, hook: func(string, int, func() (uint64, error)) (uint64, error) {
			return 0, nats.ErrTimeout
		}}
		_, err := kvx.Get(ctx, mgr, kv, "k")
		require.ErrorIs(t, err, nats.ErrTimeout)
		requireRetryError(t, err, retry.StopExhausted, 3)
		requireExhaustedEvent(t, mem, categories.KVGet, "exhausted", 3, "nats.ErrTimeout")
	})

	t.Run("invalid key", func(t *testing.T) {
		mem.Reset()
		for _, key := range []string{"", ".a", "a.", "a..b", "a b", "a*", "a>"} {
			_, err := kvx.Get(ctx, mgr, raw, key)
			require.ErrorIs(t, err, jetstream.ErrInvalidKey, "key %q", key)
		}
		_, err := kvx.Get(ctx, mgr, nil, "k")
		require.ErrorIs(t, err, kvx.ErrInvalidArgument)
		require.Zero(t, mem.Len())
	})
}

func TestKVXPut(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	raw, mgr, mem := newBucket(t, js, "put", 5)
	ctx := testCtx(t)

	rev, err := kvx.Put(ctx, mgr, raw, "a/b=c", []byte("1"))
	require.NoError(t, err)
	e, err := kvx.Get(ctx, mgr, raw, "a/b=c")
	require.NoError(t, err)
	require.Equal(t, rev, e.Revision())
	require.Equal(t, "1", string(e.Value()))

	// A lost ack: the retry puts the same value again.
	kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "put", nil)}
	rev2, err := kvx.Put(ctx, mgr, kv, "a/b=c", []byte("2"))
	require.NoError(t, err)
	e, err = raw.Get(ctx, "a/b=c")
	require.NoError(t, err)
	require.Equal(t, "2", string(e.Value()))
	require.Equal(t, rev2, e.Revision())
	attempts := eventsOf(mem, audit.TypeRetryAttempt)
	require.Len(t, attempts, 1)
	require.Equal(t, string(categories.KVPut), attempts[0].Category)
}

func TestKVXCreate(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	raw, mgr, mem := newBucket(t, js, "create", 1)
	ctx := testCtx(t)

	t.Run("fresh key", func(t *testing.T) {
		mem.Reset()
		rev, err := kvx.Create(ctx, mgr, raw, "fresh", []byte("v"))
		require.NoError(t, err)
		e, err := raw.Get(ctx, "fresh")
		require.NoError(t, err)
		require.Equal(t, rev, e.Revision())
		require.Zero(t, mem.Len())
	})

	t.Run("existing key is a permanent conflict, even with the same value", func(t *testing.T) {
		mem.Reset()
		_, err := kvx.Create(ctx, mgr, raw, "fresh", []byte("v"))
		require.ErrorIs(t, err, jetstream.ErrKeyExists)
		requireRetryError(t, err, retry.StopPermanent, 1)
		e := requireExhaustedEvent(t, mem, categories.KVPut, "permanent", 1, "jetstream.ErrKeyExists")
		require.Equal(t, "create create/fresh", e.Operation)
	})

	t.Run("deleted key can be created", func(t *testing.T) {
		require.NoError(t, raw.Delete(ctx, "fresh"))
		_, err := kvx.Create(ctx, mgr, raw, "fresh", []byte("again"))
		require.NoError(t, err)
	})

	t.Run("a retry after a lost ack finds its own value", func(t *testing.T) {
		mem.Reset()
		kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "create", func() {
			// Another key is written meanwhile, so the bucket's
			// sequence moves on.
			_, err := raw.Put(ctx, "other", []byte("x"))
			require.NoError(t, err)
		})}
		rev, err := kvx.Create(ctx, mgr, kv, "claim", []byte("owner-1"))
		require.NoError(t, err)
		require.Equal(t, 2, kv.count("create"))
		e, err := raw.Get(ctx, "claim")
		require.NoError(t, err)
		require.Equal(t, e.Revision(), rev, "the revision of the landed create")
		require.Len(t, eventsOf(mem, audit.TypeRetryAttempt), 1)
		require.Empty(t, eventsOf(mem, audit.TypeRetryExhausted))
	})

	t.Run("a retry that finds another value is a conflict", func(t *testing.T) {
		mem.Reset()
		kv := &interceptKV{KeyValue: raw, hook: func(op string, call int, real func() (uint64, error)) (uint64, error) {
			if op == "create" && call == 1 {
				// Our attempt fails before it lands, and another
				// writer takes the key.
				_, err := raw.Create(ctx, "contested", []byte("owner-2"))
				require.NoError(t, err)
				return 0, nats.ErrTimeout
			}
			return real()
		}}
		_, err := kvx.Create(ctx, mgr, kv, "contested", []byte("owner-1"))
		require.ErrorIs(t, err, jetstream.ErrKeyExists)
		requireRetryError(t, err, retry.StopPermanent, 2)
		requireExhaustedEvent(t, mem, categories.KVPut, "permanent", 2, "jetstream.ErrKeyExists")
		e, err := raw.Get(ctx, "contested")
		require.NoError(t, err)
		require.Equal(t, "owner-2", string(e.Value()))
	})
}

func TestKVXUpdate(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := testCtx(t)

	for _, history := range []uint8{1, 5} {
		t.Run(fmt.Sprintf("history %d", history), func(t *testing.T) {
			raw, mgr, mem := newBucket(t, js, fmt.Sprintf("update%d", history), history)
			rev, err := raw.Create(ctx, "k", []byte("v1"))
			require.NoError(t, err)

			t.Run("compare and set", func(t *testing.T) {
				mem.Reset()
				rev2, err := kvx.Update(ctx, mgr, raw, "k", []byte("v2"), rev)
				require.NoError(t, err)
				require.Greater(t, rev2, rev)
				rev = rev2
				require.Zero(t, mem.Len())
			})

			t.Run("wrong revision is a permanent conflict", func(t *testing.T) {
				mem.Reset()
				_, err := kvx.Update(ctx, mgr, raw, "k", []byte("v3"), rev-1)
				require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch)
				requireRetryError(t, err, retry.StopPermanent, 1)
				requireExhaustedEvent(t, mem, categories.KVPut, "permanent", 1, "jetstream.ErrKeyRevisionMismatch")
			})

			t.Run("a retry after a lost ack finds its own revision", func(t *testing.T) {
				mem.Reset()
				kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "update", func() {
					// The bucket's sequence moves on: the landed
					// revision is not last+1.
					_, err := raw.Put(ctx, "noise", []byte("x"))
					require.NoError(t, err)
				})}
				rev3, err := kvx.Update(ctx, mgr, kv, "k", []byte("v3"), rev)
				require.NoError(t, err)
				e, err := raw.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, e.Revision(), rev3)
				require.Equal(t, "v3", string(e.Value()))
				require.Len(t, eventsOf(mem, audit.TypeRetryAttempt), 1)
				require.Empty(t, eventsOf(mem, audit.TypeRetryExhausted))
				rev = rev3
			})

			t.Run("a retry that finds another writer's value is a conflict", func(t *testing.T) {
				mem.Reset()
				kv := &interceptKV{KeyValue: raw, hook: func(op string, call int, real func() (uint64, error)) (uint64, error) {
					if op == "update" && call == 1 {
						_, err := raw.Update(ctx, "k", []byte("theirs"), rev)
						require.NoError(t, err)
						return 0, nats.ErrTimeout
					}
					return real()
				}}
				_, err := kvx.Update(ctx, mgr, kv, "k", []byte("ours"), rev)
				require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch)
				requireRetryError(t, err, retry.StopPermanent, 2)
			})
		})
	}

	t.Run("a landed update overwritten since is found in the history", func(t *testing.T) {
		raw, mgr, _ := newBucket(t, js, "updatehist", 5)
		rev, err := raw.Create(ctx, "k", []byte("v1"))
		require.NoError(t, err)
		kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "update", func() {
			e, err := raw.Get(ctx, "k")
			require.NoError(t, err)
			_, err = raw.Update(ctx, "k", []byte("later"), e.Revision())
			require.NoError(t, err)
		})}
		got, err := kvx.Update(ctx, mgr, kv, "k", []byte("v2"), rev)
		require.NoError(t, err)
		e, err := raw.GetRevision(ctx, "k", got)
		require.NoError(t, err)
		require.Equal(t, "v2", string(e.Value()))
	})
}

func TestKVXDelete(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	raw, mgr, mem := newBucket(t, js, "delete", 5)
	ctx := testCtx(t)

	t.Run("delete", func(t *testing.T) {
		_, err := raw.Put(ctx, "k", []byte("v"))
		require.NoError(t, err)
		require.NoError(t, kvx.Delete(ctx, mgr, raw, "k"))
		_, err = kvx.Get(ctx, mgr, raw, "k")
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
		require.NoError(t, kvx.Delete(ctx, mgr, raw, "k"), "deleting again is fine")
		require.NoError(t, kvx.Delete(ctx, mgr, raw, "never"), "so is deleting a missing key")
		require.Zero(t, mem.Len())
	})

	t.Run("a timeout is retried under KV_DELETE", func(t *testing.T) {
		mem.Reset()
		_, err := raw.Put(ctx, "k2", []byte("v"))
		require.NoError(t, err)
		kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "delete", nil)}
		require.NoError(t, kvx.Delete(ctx, mgr, kv, "k2"))
		attempts := eventsOf(mem, audit.TypeRetryAttempt)
		require.Len(t, attempts, 1)
		require.Equal(t, string(categories.KVDelete), attempts[0].Category)
		require.Equal(t, "delete delete/k2", attempts[0].Operation)
	})

	t.Run("delete revision", func(t *testing.T) {
		mem.Reset()
		rev, err := raw.Put(ctx, "cas", []byte("v"))
		require.NoError(t, err)
		err = kvx.DeleteRevision(ctx, mgr, raw, "cas", rev-1)
		require.ErrorIs(t, err, jetstream.ErrKeyRevisionMismatch)
		requireRetryError(t, err, retry.StopPermanent, 1)
		requireExhaustedEvent(t, mem, categories.KVDelete, "permanent", 1, "jetstream.ErrKeyRevisionMismatch")

		require.NoError(t, kvx.DeleteRevision(ctx, mgr, raw, "cas", rev))
		_, err = raw.Get(ctx, "cas")
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound)

		err = kvx.DeleteRevision(ctx, mgr, raw, "cas", 0)
		require.ErrorIs(t, err, kvx.ErrInvalidArgument)
	})

	t.Run("delete revision after a lost ack", func(t *testing.T) {
		mem.Reset()
		rev, err := raw.Put(ctx, "cas2", []byte("v"))
		require.NoError(t, err)
		kv := &interceptKV{KeyValue: raw, hook: loseAck(t, "delete", nil)}
		require.NoError(t, kvx.DeleteRevision(ctx, mgr, kv, "cas2", rev))
		require.Equal(t, 2, kv.count("delete"))
		require.Len(t, eventsOf(mem, audit.TypeRetryAttempt), 1)
		require.Empty(t, eventsOf(mem, audit.TypeRetryExhausted))
	})
}
