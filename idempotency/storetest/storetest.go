// Package storetest is the conformance suite for idempotency.Store
// implementations. Every store (memory, JetStream KV, or your own) must pass
// Run.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/idempotency"
)

// Clock is a manual clock for the suite. Stores under test must read time
// only through the now function they are built with.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Factory returns a fresh, empty store that reads time from now. It is
// called once per subtest.
type Factory func(t *testing.T, now func() time.Time) idempotency.Store

const lease = 10 * time.Second

// Run runs the conformance suite against the stores newStore makes.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	setup := func(t *testing.T) (idempotency.Store, *Clock, context.Context) {
		t.Helper()
		clk := &Clock{now: time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return newStore(t, clk.Now), clk, ctx
	}

	t.Run("ClaimFreeKey", func(t *testing.T) {
		s, clk, ctx := setup(t)
		c, err := s.Claim(ctx, "k1", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, c.Status)
		require.True(t, c.Owned())
		require.Equal(t, "k1", c.Key)
		require.NotEmpty(t, c.Owner)
		require.True(t, c.LeaseUntil.Equal(clk.Now().Add(lease)), "lease until %v", c.LeaseUntil)

		rec, err := s.Get(ctx, "k1")
		require.NoError(t, err)
		require.Equal(t, idempotency.StateInProgress, rec.State)
		require.Equal(t, c.Owner, rec.Owner)
		require.Equal(t, "fp", rec.Fingerprint)
		require.True(t, rec.LeaseUntil.Equal(c.LeaseUntil))
	})

	t.Run("LiveClaimIsInProgress", func(t *testing.T) {
		s, clk, ctx := setup(t)
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		clk.Advance(lease - time.Millisecond)
		_, err = s.Claim(ctx, "k", "fp", lease)
		require.ErrorIs(t, err, idempotency.ErrInProgress)
	})

	t.Run("KeyReuse", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp-a", lease)
		require.NoError(t, err)
		_, err = s.Claim(ctx, "k", "fp-b", lease)
		require.ErrorIs(t, err, idempotency.ErrKeyReuse)
		require.NoError(t, s.Complete(ctx, c, []byte(`1`)))
		_, err = s.Claim(ctx, "k", "fp-b", lease)
		require.ErrorIs(t, err, idempotency.ErrKeyReuse)
	})

	t.Run("CompleteThenHit", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c, []byte(`{"id":"o-1"}`)))
		hit, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Completed, hit.Status)
		require.False(t, hit.Owned())
		require.JSONEq(t, `{"id":"o-1"}`, string(hit.Result))
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, rec.State)
		require.JSONEq(t, `{"id":"o-1"}`, string(rec.Result))
		require.ErrorIs(t, s.Complete(ctx, c, []byte(`2`)), idempotency.ErrLeaseLost, "a claim completes once")
		require.Error(t, s.Complete(ctx, hit, []byte(`3`)), "a hit owns nothing")
	})

	t.Run("ReleaseFreesKey", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, c))
		_, err = s.Get(ctx, "k")
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		c2, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, c2.Status)
		require.NotEqual(t, c.Owner, c2.Owner)
		require.ErrorIs(t, s.Release(ctx, c), idempotency.ErrLeaseLost, "a stale claim cannot release the new one")
	})

	t.Run("FailIsRemembered", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c, "card declined"))
		f, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Failed, f.Status)
		require.Equal(t, "card declined", f.Failure)
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, idempotency.StateFailed, rec.State)
	})

	t.Run("RenewExtendsLease", func(t *testing.T) {
		s, clk, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		stale := c
		for i := 0; i < 3; i++ {
			clk.Advance(lease / 2)
			require.NoError(t, s.Renew(ctx, &c, lease))
			require.True(t, c.LeaseUntil.Equal(clk.Now().Add(lease)))
		}
		// Well past the first lease, the owner is alive: no takeover.
		_, err = s.Claim(ctx, "k", "fp", lease)
		require.ErrorIs(t, err, idempotency.ErrInProgress)
		require.ErrorIs(t, s.Renew(ctx, &stale, lease), idempotency.ErrLeaseLost, "renewal is compare-and-set on the revision")
		require.NoError(t, s.Complete(ctx, c, []byte(`true`)))
	})

	t.Run("ExpiredClaimIsTakenOver", func(t *testing.T) {
		s, clk, ctx := setup(t)
		old, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		clk.Advance(lease)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.TakenOver, c.Status)
		require.True(t, c.Owned())
		require.Equal(t, old.Owner, c.PreviousOwner)
		require.NotEqual(t, old.Owner, c.Owner)
		require.ErrorIs(t, s.Complete(ctx, old, []byte(`1`)), idempotency.ErrLeaseLost)
		require.ErrorIs(t, s.Release(ctx, old), idempotency.ErrLeaseLost)
		require.ErrorIs(t, s.Renew(ctx, &old, lease), idempotency.ErrLeaseLost)
		require.NoError(t, s.Complete(ctx, c, []byte(`2`)))
		hit, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Completed, hit.Status)
		require.Equal(t, `2`, string(hit.Result))
	})

	t.Run("ClearIsAManualOverride", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c, []byte(`1`)))
		require.NoError(t, s.Clear(ctx, "k"))
		_, err = s.Get(ctx, "k")
		require.ErrorIs(t, err, idempotency.ErrNotFound)
		require.ErrorIs(t, s.Clear(ctx, "k"), idempotency.ErrNotFound)
		c2, err := s.Claim(ctx, "k", "other-fp", lease)
		require.NoError(t, err, "after a clear the key is free for any payload")
		require.Equal(t, idempotency.Claimed, c2.Status)
	})

	t.Run("InvalidKey", func(t *testing.T) {
		s, _, ctx := setup(t)
		for _, k := range []string{"", "a b", "a.*", "a.>", ".a", "a..b"} {
			_, err := s.Claim(ctx, k, "fp", lease)
			require.ErrorIs(t, err, idempotency.ErrInvalidKey, "key %q", k)
		}
	})

	t.Run("BadLease", func(t *testing.T) {
		s, _, ctx := setup(t)
		_, err := s.Claim(ctx, "k", "fp", 0)
		require.Error(t, err)
		_, err = s.Get(ctx, "k")
		require.ErrorIs(t, err, idempotency.ErrNotFound, "nothing claimed")
	})

	t.Run("ConcurrentClaimsHaveOneWinner", func(t *testing.T) {
		s, _, ctx := setup(t)
		const n = 32
		var wg sync.WaitGroup
		statuses := make([]idempotency.Status, n)
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := s.Claim(ctx, "hot", "fp", lease)
				statuses[i], errs[i] = c.Status, err
			}()
		}
		wg.Wait()
		winners := 0
		for i := range statuses {
			if errs[i] == nil {
				require.Equal(t, idempotency.Claimed, statuses[i])
				winners++
				continue
			}
			require.ErrorIs(t, errs[i], idempotency.ErrInProgress)
		}
		require.Equal(t, 1, winners)
	})

	t.Run("CanceledContext", func(t *testing.T) {
		s, _, _ := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.ErrorIs(t, err, context.Canceled)
	})
}
