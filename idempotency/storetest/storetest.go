// Package storetest is the conformance suite for idempotency.Store
// implementations. Every store (memory, JetStream KV, or your own) must pass
// Run.
package storetest

import (
	"context"
	"errors"
	"runtime"
	"strings"
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

// NewClock returns a clock set to start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

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

	t.Run("RecordKeepsItsHistory", func(t *testing.T) {
		s, clk, ctx := setup(t)
		created := clk.Now()
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, c.Revision, rec.Revision, "Get shows the claim's revision")
		require.Equal(t, "k", rec.Key)
		require.True(t, rec.CreatedAt.Equal(created))

		clk.Advance(lease / 2)
		require.NoError(t, s.Renew(ctx, &c, lease))
		rec, err = s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, c.Revision, rec.Revision, "a renewal moves the revision")
		require.True(t, rec.UpdatedAt.Equal(clk.Now()))

		clk.Advance(time.Second)
		require.NoError(t, s.Complete(ctx, c, []byte(`{"n":1}`)))
		rec, err = s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, rec.State)
		require.Equal(t, "fp", rec.Fingerprint, "completion keeps the fingerprint")
		require.True(t, rec.CreatedAt.Equal(created), "completion keeps created_at")
		require.True(t, rec.UpdatedAt.Equal(clk.Now()))
		require.Greater(t, rec.Revision, c.Revision)
	})

	t.Run("TakeoverKeepsCreatedAt", func(t *testing.T) {
		s, clk, ctx := setup(t)
		created := clk.Now()
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		clk.Advance(2 * lease)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.TakenOver, c.Status)
		require.True(t, c.LeaseUntil.Equal(clk.Now().Add(lease)))
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, c.Owner, rec.Owner)
		require.Equal(t, c.Revision, rec.Revision)
		require.True(t, rec.CreatedAt.Equal(created))
		require.True(t, rec.UpdatedAt.Equal(clk.Now()))
	})

	t.Run("FinishedClaimOwnsNothing", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Fail(ctx, c, "boom"))
		require.ErrorIs(t, s.Release(ctx, c), idempotency.ErrLeaseLost)
		require.ErrorIs(t, s.Complete(ctx, c, []byte(`1`)), idempotency.ErrLeaseLost)
		require.ErrorIs(t, s.Fail(ctx, c, "again"), idempotency.ErrLeaseLost)
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, idempotency.StateFailed, rec.State)
		require.Equal(t, "boom", rec.Failure)
		_, err = s.Claim(ctx, "k", "other-fp", lease)
		require.ErrorIs(t, err, idempotency.ErrKeyReuse, "a remembered failure keeps its fingerprint")
	})

	t.Run("ClearedClaimIsLost", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Clear(ctx, "k"))
		require.ErrorIs(t, s.Renew(ctx, &c, lease), idempotency.ErrLeaseLost)
		require.ErrorIs(t, s.Complete(ctx, c, []byte(`1`)), idempotency.ErrLeaseLost)
		_, err = s.Get(ctx, "k")
		require.ErrorIs(t, err, idempotency.ErrNotFound, "a lost claim writes nothing")
	})

	t.Run("StaleClaimAfterReclaim", func(t *testing.T) {
		s, _, ctx := setup(t)
		old, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, old))
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.ErrorIs(t, s.Complete(ctx, old, []byte(`1`)), idempotency.ErrLeaseLost, "the revision of a released claim never comes back")
		require.NoError(t, s.Complete(ctx, c, []byte(`2`)))
		rec, err := s.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, `2`, string(rec.Result))
	})

	t.Run("BadRenewLease", func(t *testing.T) {
		s, _, ctx := setup(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		before := c
		require.Error(t, s.Renew(ctx, &c, 0))
		require.Equal(t, before, c, "a refused renewal changes nothing")
		require.NoError(t, s.Complete(ctx, c, []byte(`1`)))
	})

	t.Run("KeyShapes", func(t *testing.T) {
		s, _, ctx := setup(t)
		long := strings.Repeat("a", 256)
		for _, k := range []string{"a.b.c", "A-Z_0=9", long, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"} {
			c, err := s.Claim(ctx, k, "fp", lease)
			require.NoError(t, err, "key %q", k)
			require.NoError(t, s.Complete(ctx, c, []byte(`1`)))
			rec, err := s.Get(ctx, k)
			require.NoError(t, err)
			require.Equal(t, k, rec.Key)
		}
		_, err := s.Claim(ctx, long+"a", "fp", lease)
		require.ErrorIs(t, err, idempotency.ErrInvalidKey)
		_, err = s.Get(ctx, "a")
		require.ErrorIs(t, err, idempotency.ErrNotFound, "keys are distinct: a.b.c is not a")
	})

	t.Run("ConcurrentTakeoversHaveOneWinner", func(t *testing.T) {
		s, clk, ctx := setup(t)
		orphan, err := s.Claim(ctx, "hot", "fp", lease)
		require.NoError(t, err)
		clk.Advance(lease)
		const n = 16
		var wg sync.WaitGroup
		claims := make([]idempotency.Claim, n)
		errs := make([]error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				claims[i], errs[i] = s.Claim(ctx, "hot", "fp", lease)
			}()
		}
		wg.Wait()
		winners := 0
		for i := range claims {
			if errs[i] == nil {
				require.Equal(t, idempotency.TakenOver, claims[i].Status)
				require.Equal(t, orphan.Owner, claims[i].PreviousOwner)
				winners++
				continue
			}
			require.ErrorIs(t, errs[i], idempotency.ErrInProgress)
		}
		require.Equal(t, 1, winners)
	})

	t.Run("ConcurrentClaimAndRelease", func(t *testing.T) {
		// Owners claim and release the key while others try to: at any
		// time at most one of them owns it.
		s, _, ctx := setup(t)
		const workers, rounds = 8, 20
		var mu sync.Mutex
		inside, peak, runs := 0, 0, 0
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					c, err := s.Claim(ctx, "hot", "fp", lease)
					if errors.Is(err, idempotency.ErrInProgress) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					inside++
					peak, runs = max(peak, inside), runs+1
					mu.Unlock()
					runtime.Gosched() // widen the window an overlap would show in
					mu.Lock()
					inside--
					mu.Unlock()
					if err := s.Release(ctx, c); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		require.Equal(t, 1, peak)
		require.Positive(t, runs)
		_, err := s.Get(ctx, "hot")
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})

	runWait(t, setup)
}
