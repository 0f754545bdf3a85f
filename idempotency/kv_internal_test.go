package idempotency

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/internal/natstest"
)

// fakeNow is a settable clock.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func TestKVHeldCacheIsPrunedAndOptional(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clk := &fakeNow{t: time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)}
	kv, err := NewKV(ctx, js, KVConfig{Bucket: "HELD_PRUNE", Now: clk.now, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)

	// Owners that never end their claims (they gave up on the store).
	abandoned := make([]Claim, kvHeldPrune)
	for i := range abandoned {
		abandoned[i], err = kv.Claim(ctx, "k"+strconv.Itoa(i), "fp", time.Minute)
		require.NoError(t, err)
	}
	clk.add(time.Minute)
	_, err = kv.Claim(ctx, "fresh", "fp", time.Minute)
	require.NoError(t, err)
	kv.mu.Lock()
	n := len(kv.held)
	kv.mu.Unlock()
	require.Equal(t, 1, n, "claims past their lease are pruned")

	// A pruned claim still ends correctly: it is read back from its record.
	c := abandoned[7]
	require.NoError(t, kv.Renew(ctx, &c, time.Minute))
	require.NoError(t, kv.Complete(ctx, c, []byte(`1`)))
	rec, err := kv.Get(ctx, c.Key)
	require.NoError(t, err)
	require.Equal(t, StateCompleted, rec.State)
	require.Equal(t, "fp", rec.Fingerprint)
	require.True(t, rec.CreatedAt.Equal(clk.now().Add(-time.Minute)))
	// A pruned claim that was taken over is lost.
	taken, err := kv.Claim(ctx, abandoned[8].Key, "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, TakenOver, taken.Status)
	require.ErrorIs(t, kv.Complete(ctx, abandoned[8], []byte(`1`)), ErrLeaseLost)
}

func TestKVAdaptiveClaimMode(t *testing.T) {
	k := &KV{mode: ClaimAdaptive}
	require.False(t, k.readFirst(), "a fresh store creates first")
	for i := 0; i < 16; i++ {
		k.noteDuplicate(true)
	}
	require.True(t, k.readFirst(), "mostly duplicates: read first")
	for i := 0; i < 16; i++ {
		k.noteDuplicate(false)
	}
	require.False(t, k.readFirst(), "mostly new keys: create first")
	require.True(t, (&KV{mode: ClaimReadFirst}).readFirst())
	require.False(t, (&KV{mode: ClaimCreateFirst}).readFirst())
}
