package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/idempotency"
)

// setupFunc makes the store, clock and context of one subtest.
type setupFunc func(t *testing.T) (idempotency.Store, *Clock, context.Context)

// waited is what a Wait returned.
type waited struct {
	c   idempotency.Claim
	err error
}

// waitSettle is how long a waiter is given to (wrongly) return while the
// claim it waits on stays live.
const waitSettle = 50 * time.Millisecond

// runWait runs the cases of idempotency.Waiter, skipped for stores that do
// not implement it.
func runWait(t *testing.T, setup setupFunc) {
	t.Helper()
	waiter := func(t *testing.T) (idempotency.Store, idempotency.Waiter, *Clock, context.Context) {
		t.Helper()
		s, clk, ctx := setup(t)
		w, ok := s.(idempotency.Waiter)
		if !ok {
			t.Skipf("%T does not implement idempotency.Waiter", s)
		}
		return s, w, clk, ctx
	}
	// wait starts a Wait and returns where its outcome arrives.
	wait := func(ctx context.Context, w idempotency.Waiter, key, fp string) <-chan waited {
		ch := make(chan waited, 1)
		go func() {
			c, err := w.Wait(ctx, key, fp)
			ch <- waited{c, err}
		}()
		return ch
	}
	pending := func(t *testing.T, ch <-chan waited) {
		t.Helper()
		select {
		case r := <-ch:
			t.Fatalf("Wait returned while the claim is live: %+v", r)
		case <-time.After(waitSettle):
		}
	}
	outcome := func(t *testing.T, ch <-chan waited) waited {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return")
			return waited{}
		}
	}

	t.Run("WaitForCompletion", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "fp")
		pending(t, ch)
		require.NoError(t, s.Complete(ctx, c, []byte(`{"id":"o-1"}`)))
		r := outcome(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, idempotency.Completed, r.c.Status)
		require.False(t, r.c.Owned())
		require.JSONEq(t, `{"id":"o-1"}`, string(r.c.Result))
	})

	t.Run("WaitForFailure", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "")
		pending(t, ch)
		require.NoError(t, s.Fail(ctx, c, "card declined"))
		r := outcome(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, idempotency.Failed, r.c.Status)
		require.Equal(t, "card declined", r.c.Failure)
	})

	t.Run("WaitOnFinishedRecordReturnsAtOnce", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.NoError(t, s.Complete(ctx, c, []byte(`7`)))
		got, err := w.Wait(ctx, "k", "fp")
		require.NoError(t, err)
		require.Equal(t, idempotency.Completed, got.Status)
		require.Equal(t, `7`, string(got.Result))
	})

	t.Run("WaitWithoutRecordIsNotFound", func(t *testing.T) {
		_, w, _, ctx := waiter(t)
		_, err := w.Wait(ctx, "nothing", "fp")
		require.ErrorIs(t, err, idempotency.ErrNotFound)
	})

	t.Run("WaitEndsOnRelease", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "fp")
		pending(t, ch)
		require.NoError(t, s.Release(ctx, c))
		r := outcome(t, ch)
		require.ErrorIs(t, r.err, idempotency.ErrNotFound, "the caller may claim the key")
		c2, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.Claimed, c2.Status)
	})

	t.Run("WaitEndsOnClear", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "fp")
		pending(t, ch)
		require.NoError(t, s.Clear(ctx, "k"))
		require.ErrorIs(t, outcome(t, ch).err, idempotency.ErrNotFound)
	})

	t.Run("WaitThroughRenewals", func(t *testing.T) {
		s, w, clk, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "fp")
		for i := 0; i < 3; i++ {
			clk.Advance(lease / 2)
			require.NoError(t, s.Renew(ctx, &c, lease))
			pending(t, ch)
		}
		require.NoError(t, s.Complete(ctx, c, []byte(`"done"`)))
		r := outcome(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, `"done"`, string(r.c.Result))
	})

	t.Run("WaitOnExpiredClaim", func(t *testing.T) {
		s, w, clk, ctx := waiter(t)
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		clk.Advance(lease)
		_, err = w.Wait(ctx, "k", "fp")
		require.ErrorIs(t, err, idempotency.ErrClaimExpired)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		require.Equal(t, idempotency.TakenOver, c.Status)
	})

	t.Run("WaitSeesLeaseEnd", func(t *testing.T) {
		s, w, clk, ctx := waiter(t)
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		ch := wait(ctx, w, "k", "fp")
		pending(t, ch)
		clk.Advance(lease) // the owner died: nothing is written
		require.ErrorIs(t, outcome(t, ch).err, idempotency.ErrClaimExpired)
	})

	t.Run("WaitKeyReuse", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp-a", lease)
		require.NoError(t, err)
		_, err = w.Wait(ctx, "k", "fp-b")
		require.ErrorIs(t, err, idempotency.ErrKeyReuse)
		require.NoError(t, s.Complete(ctx, c, []byte(`1`)))
		_, err = w.Wait(ctx, "k", "fp-b")
		require.ErrorIs(t, err, idempotency.ErrKeyReuse, "another payload never gets this result")
	})

	t.Run("WaitIsBoundedByContext", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		_, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, waitSettle)
		defer cancel()
		start := time.Now()
		_, err = w.Wait(wctx, "k", "fp")
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Less(t, time.Since(start), 5*time.Second)

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = w.Wait(cctx, "k", "fp")
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("WaitInvalidKey", func(t *testing.T) {
		_, w, _, ctx := waiter(t)
		for _, k := range []string{"", "a.*", "a.>", "a b"} {
			_, err := w.Wait(ctx, k, "fp")
			require.ErrorIs(t, err, idempotency.ErrInvalidKey, "key %q", k)
		}
	})

	t.Run("ManyWaitersOneResult", func(t *testing.T) {
		s, w, _, ctx := waiter(t)
		c, err := s.Claim(ctx, "k", "fp", lease)
		require.NoError(t, err)
		const n = 8
		chs := make([]<-chan waited, n)
		for i := range chs {
			chs[i] = wait(ctx, w, "k", "fp")
		}
		pending(t, chs[0])
		require.NoError(t, s.Complete(ctx, c, []byte(`42`)))
		for _, ch := range chs {
			r := outcome(t, ch)
			require.NoError(t, r.err)
			require.Equal(t, `42`, string(r.c.Result))
		}
	})
}
