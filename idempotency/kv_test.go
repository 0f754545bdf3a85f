package idempotency_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/idempotency/storetest"
	"github.com/jetretry/jetretry/internal/natstest"
)

// bucketSeq numbers buckets so that every store in a test run is isolated.
var bucketSeq atomic.Int64

func freshBucket() string { return fmt.Sprintf("IDEM_TEST_%d", bucketSeq.Add(1)) }

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newKV returns a KV store on a fresh bucket of s.
func newKV(t *testing.T, js jetstream.JetStream, cfg idempotency.KVConfig) *idempotency.KV {
	t.Helper()
	if cfg.Bucket == "" {
		cfg.Bucket = freshBucket()
	}
	kv, err := idempotency.NewKV(testCtx(t), js, cfg)
	require.NoError(t, err)
	return kv
}

func TestKVConformance(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	for _, mode := range []idempotency.ClaimMode{idempotency.ClaimAdaptive, idempotency.ClaimCreateFirst, idempotency.ClaimReadFirst} {
		t.Run(fmt.Sprintf("mode=%d", mode), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
				return newKV(t, js, idempotency.KVConfig{Now: now, Storage: jetstream.MemoryStorage, Claim: mode})
			})
		})
	}
}

// rawBucket opens the store's bucket for raw reads and writes.
func rawBucket(t *testing.T, js jetstream.JetStream, kv *idempotency.KV) jetstream.KeyValue {
	t.Helper()
	b, err := js.KeyValue(testCtx(t), kv.Bucket())
	require.NoError(t, err)
	return b
}

func TestKVRecordFormat(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	clk := storetest.NewClock(time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC))
	kv := newKV(t, js, idempotency.KVConfig{Now: clk.Now})
	raw := rawBucket(t, js, kv)
	ctx := testCtx(t)

	c, err := kv.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	e, err := raw.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, c.Revision, e.Revision())
	require.JSONEq(t, `{"v":1,"state":"in_progress","owner":"`+c.Owner+`","lease_until":"2026-01-25T21:16:00Z",
		"fingerprint":"fp","created_at":"2026-01-25T21:15:00Z","updated_at":"2026-01-25T21:15:00Z"}`, string(e.Value()))

	clk.Advance(time.Second)
	require.NoError(t, kv.Complete(ctx, c, []byte(`{"url":"https://x.test/?a=1&b=<2>"}`)))
	e, err = raw.Get(ctx, "k")
	require.NoError(t, err)
	require.JSONEq(t, `{"v":1,"state":"completed","fingerprint":"fp","result":{"url":"https://x.test/?a=1&b=<2>"},
		"created_at":"2026-01-25T21:15:00Z","updated_at":"2026-01-25T21:15:01Z"}`, string(e.Value()))
	require.Contains(t, string(e.Value()), `&b=<2>`, "the result is stored as raw JSON, not escaped or base64")

	c2, err := kv.Claim(ctx, "k2", "fp", time.Minute)
	require.NoError(t, err)
	require.ErrorContains(t, kv.Complete(ctx, c2, []byte(`{not json`)), "not valid JSON")
	require.NoError(t, kv.Release(ctx, c2), "a refused result leaves the claim owned")
}

func TestKVBucketSettings(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.JetStream(t)
	ctx := testCtx(t)

	t.Run("Defaults", func(t *testing.T) {
		kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{})
		require.NoError(t, err)
		require.Equal(t, idempotency.DefaultKVBucket, kv.Bucket())
		st, err := rawBucket(t, js, kv).Status(ctx)
		require.NoError(t, err)
		cfg := st.Config()
		require.Equal(t, "JETRETRY_IDEMPOTENCY", cfg.Bucket)
		require.Equal(t, 24*time.Hour, cfg.TTL)
		require.Equal(t, 1, cfg.Replicas)
		require.Equal(t, jetstream.FileStorage, cfg.Storage)
		require.Equal(t, int64(1), st.History())
		require.Zero(t, cfg.LimitMarkerTTL)
		require.Equal(t, int32(-1), cfg.MaxValueSize)
		require.Equal(t, int(nc.MaxPayload())-128, kv.MaxRecordSize(), "the connection's max payload bounds records")
	})

	t.Run("Configured", func(t *testing.T) {
		kv := newKV(t, js, idempotency.KVConfig{
			TTL: 90 * time.Minute, Replicas: 1, LimitMarkerTTL: 2 * time.Second,
			MaxValueSize: 4096, Storage: jetstream.MemoryStorage,
		})
		st, err := rawBucket(t, js, kv).Status(ctx)
		require.NoError(t, err)
		cfg := st.Config()
		require.Equal(t, 90*time.Minute, cfg.TTL)
		require.Equal(t, 1, cfg.Replicas)
		require.Equal(t, 2*time.Second, cfg.LimitMarkerTTL)
		require.Equal(t, int32(4096), cfg.MaxValueSize)
		require.Equal(t, jetstream.MemoryStorage, cfg.Storage)
		require.Equal(t, 4096-128, kv.MaxRecordSize())
	})

	t.Run("ExistingBucketIsUsedAsIs", func(t *testing.T) {
		name := freshBucket()
		_, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, TTL: time.Hour, MaxValueSize: 2048})
		require.NoError(t, err)
		kv := newKV(t, js, idempotency.KVConfig{Bucket: name, TTL: 48 * time.Hour})
		st, err := rawBucket(t, js, kv).Status(ctx)
		require.NoError(t, err)
		require.Equal(t, time.Hour, st.TTL(), "NewKV never changes an existing bucket")
		require.Equal(t, 2048-128, kv.MaxRecordSize(), "the existing bucket's value limit applies")
		c, err := kv.Claim(ctx, "k", "fp", time.Minute)
		require.NoError(t, err)
		require.NoError(t, kv.Complete(ctx, c, []byte(`1`)))
	})

	t.Run("ServerRefusesSettings", func(t *testing.T) {
		_, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: freshBucket(), Replicas: 3})
		require.Error(t, err, "R3 needs a cluster")
		require.NotErrorIs(t, err, idempotency.ErrInvalidConfig)
		require.NotErrorIs(t, err, idempotency.ErrUnavailable, "the server answered")
	})
}

func TestKVConfigValidation(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		cfg  idempotency.KVConfig
	}{
		{"bucket with a dot", idempotency.KVConfig{Bucket: "a.b"}},
		{"bucket with a space", idempotency.KVConfig{Bucket: "a b"}},
		{"bucket with a wildcard", idempotency.KVConfig{Bucket: "a*"}},
		{"negative replicas", idempotency.KVConfig{Replicas: -1}},
		{"six replicas", idempotency.KVConfig{Replicas: 6}},
		{"negative TTL", idempotency.KVConfig{TTL: -time.Second}},
		{"negative marker TTL", idempotency.KVConfig{LimitMarkerTTL: -time.Second}},
		{"sub-second marker TTL", idempotency.KVConfig{LimitMarkerTTL: 500 * time.Millisecond}},
		{"negative max value size", idempotency.KVConfig{MaxValueSize: -1}},
		{"tiny max value size", idempotency.KVConfig{MaxValueSize: 100}},
		{"unknown storage", idempotency.KVConfig{Storage: jetstream.StorageType(7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := idempotency.NewKV(ctx, js, tc.cfg)
			require.ErrorIs(t, err, idempotency.ErrInvalidConfig)
		})
	}
	t.Run("nil JetStream", func(t *testing.T) {
		_, err := idempotency.NewKV(ctx, nil, idempotency.KVConfig{})
		require.ErrorIs(t, err, idempotency.ErrInvalidConfig)
	})
	lister := js.KeyValueStoreNames(ctx)
	for n := range lister.Name() {
		t.Errorf("a refused config created bucket %s", n)
	}
}

func TestKVResultTooLarge(t *testing.T) {
	s := natstest.Start(t, natstest.WithMaxPayload(8192))
	_, js := s.JetStream(t)
	ctx := testCtx(t)

	for _, tc := range []struct {
		name string
		cfg  idempotency.KVConfig
		max  int
	}{
		{"connection max payload", idempotency.KVConfig{}, 8192 - 128},
		{"bucket max value size", idempotency.KVConfig{MaxValueSize: 2048}, 2048 - 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A fixed clock: time.Now's nanoseconds vary the record's size.
			tc.cfg.Now = storetest.NewClock(time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)).Now
			kv := newKV(t, js, tc.cfg)
			require.Equal(t, tc.max, kv.MaxRecordSize())
			c, err := kv.Claim(ctx, "k", "fp", time.Minute)
			require.NoError(t, err)

			big := []byte(`"` + strings.Repeat("x", tc.max) + `"`)
			err = kv.Complete(ctx, c, big)
			require.ErrorIs(t, err, idempotency.ErrResultTooLarge)
			var tl *idempotency.ResultTooLargeError
			require.ErrorAs(t, err, &tl)
			require.Equal(t, "k", tl.Key)
			require.Equal(t, tc.max, tl.Max)
			require.Greater(t, tl.Size, tl.Max)

			rec, err := kv.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, idempotency.StateInProgress, rec.State, "nothing was recorded")
			require.Equal(t, c.Revision, rec.Revision)

			// The largest result that fits is written: the header room
			// is enough for the server.
			fits := fitResult(t, kv, c, tc.max)
			require.NoError(t, kv.Complete(ctx, c, fits))
			hit, err := kv.Claim(ctx, "k", "fp", time.Minute)
			require.NoError(t, err)
			require.Equal(t, idempotency.Completed, hit.Status)
			require.Equal(t, string(fits), string(hit.Result))
		})
	}
}

// fitResult returns a string result whose completed record is exactly max
// bytes.
func fitResult(t *testing.T, kv *idempotency.KV, c idempotency.Claim, max int) []byte {
	t.Helper()
	// The record without the result's padding: measure it with an empty
	// string result, through the error of an oversized one.
	probe := []byte(`"` + strings.Repeat("x", max) + `"`)
	err := kv.Complete(testCtx(t), c, probe)
	var tl *idempotency.ResultTooLargeError
	require.ErrorAs(t, err, &tl)
	overhead := tl.Size - len(probe)
	return []byte(`"` + strings.Repeat("y", max-overhead-2) + `"`)
}

func TestKVCorruptRecords(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	kv := newKV(t, js, idempotency.KVConfig{})
	raw := rawBucket(t, js, kv)
	ctx := testCtx(t)

	for i, value := range []string{
		`not json`,
		``,
		`null`,
		`[]`,
		`{"state":"completed","fingerprint":"fp"}`,
		`{"v":2,"state":"completed","fingerprint":"fp"}`,
		`{"v":1,"fingerprint":"fp"}`,
		`{"v":1,"state":"exploded","fingerprint":"fp"}`,
		`{"v":1,"state":"in_progress","fingerprint":"fp"}`,
		`{"v":1,"state":"completed","fingerprint":"fp","created_at":"yesterday"}`,
	} {
		t.Run(fmt.Sprintf("%d %s", i, value), func(t *testing.T) {
			key := fmt.Sprintf("corrupt-%d", i)
			rev, err := raw.Put(ctx, key, []byte(value))
			require.NoError(t, err)

			_, err = kv.Claim(ctx, key, "fp", time.Minute)
			require.ErrorIs(t, err, idempotency.ErrCorrupt, "claim fails closed")
			var ce *idempotency.CorruptRecordError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, key, ce.Key)
			require.Equal(t, rev, ce.Revision)
			require.Error(t, ce.Err)

			_, err = kv.Get(ctx, key)
			require.ErrorIs(t, err, idempotency.ErrCorrupt)
			_, err = kv.Wait(ctx, key, "fp")
			require.ErrorIs(t, err, idempotency.ErrCorrupt)

			require.NoError(t, kv.Clear(ctx, key), "an operator clears it")
			c, err := kv.Claim(ctx, key, "fp", time.Minute)
			require.NoError(t, err)
			require.Equal(t, idempotency.Claimed, c.Status)
		})
	}
}

func TestKVClaimsAcrossStores(t *testing.T) {
	// A claim made by one store (one process) can be ended by another
	// store on the bucket: the record, not the process, holds the claim.
	s := natstest.Start(t)
	_, js1 := s.JetStream(t)
	_, js2 := s.JetStream(t)
	a := newKV(t, js1, idempotency.KVConfig{})
	b := newKV(t, js2, idempotency.KVConfig{Bucket: a.Bucket()})
	ctx := testCtx(t)

	c, err := a.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	_, err = b.Claim(ctx, "k", "fp", time.Minute)
	require.ErrorIs(t, err, idempotency.ErrInProgress)
	require.NoError(t, b.Renew(ctx, &c, time.Minute))
	stale := c
	require.NoError(t, b.Renew(ctx, &c, time.Minute))
	require.ErrorIs(t, b.Complete(ctx, stale, []byte(`0`)), idempotency.ErrLeaseLost)
	require.ErrorIs(t, a.Complete(ctx, stale, []byte(`0`)), idempotency.ErrLeaseLost)
	require.NoError(t, a.Complete(ctx, c, []byte(`1`)))
	hit, err := b.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, hit.Status)
	require.Equal(t, `1`, string(hit.Result))
}

func TestKVUnavailable(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.JetStream(t, nats.ReconnectWait(20*time.Millisecond))
	kv := newKV(t, js, idempotency.KVConfig{})
	ctx := testCtx(t)
	held, err := kv.Claim(ctx, "held", "fp", time.Minute)
	require.NoError(t, err)
	doomed, err := kv.Claim(ctx, "doomed", "fp", time.Minute)
	require.NoError(t, err)

	s.Shutdown()
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}
	start := time.Now()
	_, err = kv.Claim(short(), "k", "fp", time.Minute)
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the cause is kept")
	require.Less(t, time.Since(start), 2*time.Second, "the caller's deadline bounds the claim")
	// The writes below stay in the client's reconnect buffer and land
	// when the server is back: "unavailable" does not mean "not done".
	// Compare-and-set on the revision keeps that safe; "doomed" is not
	// used again.
	for name, err := range map[string]error{
		"renew":    kv.Renew(short(), &doomed, time.Minute),
		"complete": kv.Complete(short(), doomed, []byte(`1`)),
		"fail":     kv.Fail(short(), doomed, "x"),
		"release":  kv.Release(short(), doomed),
		"clear":    kv.Clear(short(), "doomed"),
	} {
		require.ErrorIs(t, err, idempotency.ErrUnavailable, name)
	}
	_, err = kv.Get(short(), "held")
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	_, err = kv.Wait(short(), "held", "fp")
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	_, err = idempotency.NewKV(short(), js, idempotency.KVConfig{Bucket: freshBucket()})
	require.ErrorIs(t, err, idempotency.ErrUnavailable)

	// The server comes back: the store works again, and the claim held
	// through the outage is intact.
	s.Up()
	require.Eventually(t, nc.IsConnected, 10*time.Second, 20*time.Millisecond)
	require.NoError(t, kv.Complete(ctx, held, []byte(`1`)))

	nc.Close()
	start = time.Now()
	_, err = kv.Claim(ctx, "k2", "fp", time.Minute)
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	require.ErrorIs(t, err, nats.ErrConnectionClosed, "the cause is kept")
	require.Less(t, time.Since(start), time.Second, "a closed connection fails at once")
}

func TestKVWaitSeesBucketExpiry(t *testing.T) {
	// With limit markers, a record removed by the bucket's TTL ends a
	// Wait like a release does. This test waits for a real second.
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	kv := newKV(t, js, idempotency.KVConfig{TTL: time.Second, LimitMarkerTTL: time.Second})
	ctx := testCtx(t)
	_, err := kv.Claim(ctx, "k", "fp", time.Hour)
	require.NoError(t, err)
	start := time.Now()
	_, err = kv.Wait(ctx, "k", "fp")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	require.Less(t, time.Since(start), 5*time.Second)
	c, err := kv.Claim(ctx, "k", "fp", time.Hour)
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, c.Status, "the expired record is gone")
}
