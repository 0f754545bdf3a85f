package retry_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/retry"
)

// kvFixture is a manager on a KV store of an embedded server.
type kvFixture struct {
	srv   *natstest.Server
	nc    *nats.Conn
	js    jetstream.JetStream
	store *idempotency.KV
	em    *audit.Memory
	mgr   *retry.Manager
}

func newKVFixture(t *testing.T, opts ...natstest.Option) *kvFixture {
	t.Helper()
	f := &kvFixture{srv: natstest.Start(t, opts...), em: &audit.Memory{}}
	f.nc, f.js = f.srv.JetStream(t, nats.ReconnectWait(20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	f.store, err = idempotency.NewKV(ctx, f.js, idempotency.KVConfig{Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	f.mgr, err = retry.NewManager(retry.WithStore(f.store), retry.WithEmitter(f.em), retry.WithDefaultPolicy(policy(3, 0, 0)))
	require.NoError(t, err)
	return f
}

func TestKVResultTooLargeIsNotRecorded(t *testing.T) {
	f := newKVFixture(t, natstest.WithMaxPayload(4096))
	ctx := context.Background()
	var runs atomic.Int64
	big := strings.Repeat("x", 8192)
	v, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (string, error) { runs.Add(1); return big, nil },
		retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrNotRecorded)
	var tl *idempotency.ResultTooLargeError
	require.ErrorAs(t, err, &tl)
	require.Equal(t, 4096-128, tl.Max)
	require.Equal(t, big, v, "the operation ran: its result comes with the error")
	require.Equal(t, int64(1), runs.Load())

	_, err = f.store.Get(ctx, "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound, "no completed record, and the claim is released")
	require.Empty(t, f.em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionRecord }))

	v, err = retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (string, error) { runs.Add(1); return "small", nil },
		retry.WithIdempotencyKey("k"))
	require.NoError(t, err, "the key is free again")
	require.Equal(t, "small", v)
}

func TestKVStoreUnreachableFailsClosed(t *testing.T) {
	f := newKVFixture(t)
	f.srv.Shutdown()
	var runs atomic.Int64
	fn := func(context.Context) (int, error) { runs.Add(1); return 1, nil }

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	require.Less(t, time.Since(start), 2*time.Second)
	require.Zero(t, runs.Load(), "fail closed: nothing executes")

	f.nc.Close()
	_, err = retry.Do(context.Background(), f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	require.Zero(t, runs.Load())
	v, err := retry.Do(context.Background(), f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.FailOpen())
	require.NoError(t, err)
	require.Equal(t, 1, v)
	require.Equal(t, int64(1), runs.Load(), "fail-open runs without protection")
}

func TestKVCorruptRecordNeverRuns(t *testing.T) {
	f := newKVFixture(t)
	ctx := context.Background()
	raw, err := f.js.KeyValue(ctx, f.store.Bucket())
	require.NoError(t, err)
	_, err = raw.Put(ctx, "k", []byte(`{"v":99}`))
	require.NoError(t, err)
	_, err = retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) { t.Error("must not run"); return 0, nil },
		retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrCorrupt)
	require.NoError(t, f.store.Clear(ctx, "k"))
	v, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) { return 3, nil }, retry.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestKVWaitForResult(t *testing.T) {
	f := newKVFixture(t)
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	owner := start(ctx, f.mgr, func(context.Context) (order, error) {
		close(started)
		<-release
		return order{ID: "o-9", Total: 1}, nil
	}, retry.WithIdempotencyKey("k"))
	<-started

	const waiters = 4
	chs := make([]<-chan result[order], waiters)
	for i := range chs {
		chs[i] = start(ctx, f.mgr, func(context.Context) (order, error) {
			t.Error("a waiter must not run")
			return order{}, nil
		}, retry.WithIdempotencyKey("k"), retry.WaitForResult())
	}
	time.Sleep(30 * time.Millisecond)
	close(release)
	require.NoError(t, recv(t, owner).err)
	for _, ch := range chs {
		r := recv(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, order{ID: "o-9", Total: 1}, r.v)
	}
	require.Len(t, f.em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionHit }), waiters)
}
