package retry_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
	"github.com/jetretry/jetretry/retry/retrytest"
)

type order struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

func idemFixture(t *testing.T, p retry.Policy, opts ...retry.ManagerOption) (*fixture, *idempotency.Memory) {
	t.Helper()
	clk := retrytest.NewClock(epoch)
	store := idempotency.NewMemory(clk.Now, 0)
	f := newFixture(t, p, nil, append([]retry.ManagerOption{retry.WithClock(clk), retry.WithStore(store)}, opts...)...)
	f.clk = clk
	return f, store
}

func TestIdempotentRecordThenHit(t *testing.T) {
	f, store := idemFixture(t, policy(3, 0, 0))
	key, err := idempotency.Key("create_order", "tenant-123", "corr-456", map[string]any{"sku": "A-1"})
	require.NoError(t, err)
	runs := 0
	create := func(context.Context) (order, error) {
		runs++
		return order{ID: "o-1", Total: 99}, nil
	}
	opts := []retry.Option{retry.WithIdempotencyKey(key), retry.WithTenant("tenant-123"), retry.WithCorrelation("corr-456")}

	v, err := retry.Do(context.Background(), f.mgr, testCat, "create order", create, opts...)
	require.NoError(t, err)
	require.Equal(t, order{ID: "o-1", Total: 99}, v)

	rec, err := store.Get(context.Background(), key)
	require.NoError(t, err)
	require.Equal(t, idempotency.StateCompleted, rec.State)
	require.JSONEq(t, `{"id":"o-1","total":99}`, string(rec.Result))

	v2, err := retry.Do(context.Background(), f.mgr, testCat, "create order", create, opts...)
	require.NoError(t, err)
	require.Equal(t, v, v2)
	require.Equal(t, 1, runs, "the second call is served from the store")

	events := f.em.Events()
	require.Len(t, events, 2)
	for i, action := range []audit.Action{audit.ActionRecord, audit.ActionHit} {
		e := events[i]
		require.Equal(t, audit.TypeIdempotency, e.Type)
		require.Equal(t, action, e.Action)
		require.Equal(t, key, e.IdempotencyKey)
		require.Equal(t, "tenant-123", e.TenantID)
		require.Equal(t, "corr-456", e.CorrelationID)
		require.NotEmpty(t, e.SpanID)
		require.NoError(t, e.Validate())
	}
}

func TestIdempotentConcurrentDuplicatesRunOnce(t *testing.T) {
	store := idempotency.NewMemory(nil, 0)
	em := &audit.Memory{}
	m, err := retry.NewManager(retry.WithStore(store), retry.WithEmitter(em), retry.WithDefaultPolicy(policy(3, 0, 0)))
	require.NoError(t, err)
	key, err := idempotency.Key("send_email", "t", "c", nil)
	require.NoError(t, err)

	var executions atomic.Int64
	release := make(chan struct{})
	startLine := make(chan struct{})
	const callers = 100
	results := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startLine
			// Duplicates see ErrInProgress until the owner finishes, then
			// the cached result. Bounded: at most 2000 tries, 1 ms apart.
			for try := 0; try < 2000; try++ {
				v, err := retry.Do(context.Background(), m, testCat, "send", func(context.Context) (string, error) {
					executions.Add(1)
					<-release
					return "sent", nil
				}, retry.WithIdempotencyKey(key))
				if errors.Is(err, idempotency.ErrInProgress) {
					time.Sleep(time.Millisecond)
					continue
				}
				results[i], errs[i] = v, err
				return
			}
			errs[i] = errors.New("gave up waiting")
		}()
	}
	close(startLine)
	time.Sleep(20 * time.Millisecond) // let duplicates pile up on the live claim
	close(release)
	wg.Wait()
	require.Equal(t, int64(1), executions.Load())
	for i := range results {
		require.NoError(t, errs[i])
		require.Equal(t, "sent", results[i])
	}
	records := em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionRecord })
	hits := em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionHit })
	require.Len(t, records, 1)
	require.Len(t, hits, callers-1)
}

func TestIdempotentInProgressAndKeyReuse(t *testing.T) {
	f, store := idemFixture(t, policy(3, 0, 0))
	ctx := context.Background()
	c, err := store.Claim(ctx, "k1", "some-other-owner-fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, c.Status)

	fn := func(context.Context) (int, error) { t.Fatal("must not run"); return 0, nil }
	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k1"), retry.WithFingerprint("some-other-owner-fp"))
	require.ErrorIs(t, err, idempotency.ErrInProgress)

	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k1"), retry.WithFingerprint("different-payload"))
	require.ErrorIs(t, err, idempotency.ErrKeyReuse)

	// The default fingerprint covers category and operation.
	_, err = retry.Do(ctx, f.mgr, testCat, "op A", func(context.Context) (int, error) { return 1, nil }, retry.WithIdempotencyKey("k2"))
	require.NoError(t, err)
	_, err = retry.Do(ctx, f.mgr, testCat, "op B", fn, retry.WithIdempotencyKey("k2"))
	require.ErrorIs(t, err, idempotency.ErrKeyReuse)

	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("bad key*"))
	require.ErrorIs(t, err, idempotency.ErrInvalidKey)
}

func TestIdempotentFailureReleasesClaim(t *testing.T) {
	f, store := idemFixture(t, policy(2, 0, 0))
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) (int, error) {
		runs++
		if runs <= 2 {
			return 0, io.EOF
		}
		return runs, nil
	}
	_, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, retry.ErrExhausted)
	_, err = store.Get(ctx, "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound, "a failed call releases its claim")

	v, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestIdempotentRememberFailure(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0))
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 0, errors.New("card declined") }
	_, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.RememberFailure())
	require.ErrorIs(t, err, retry.ErrExhausted)
	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrFailed)
	require.Contains(t, err.Error(), "card declined")
	require.Equal(t, 1, runs)

	require.NoError(t, store.Clear(ctx, "k"))
	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, 2, runs)
}

// downStore is a store that cannot be reached.
type downStore struct{ idempotency.Memory }

func (*downStore) Claim(context.Context, string, string, time.Duration) (idempotency.Claim, error) {
	return idempotency.Claim{}, errors.New("nats: no servers available for connection")
}

func TestIdempotentFailsClosed(t *testing.T) {
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) (int, error) { runs++; return 1, nil }

	noStore, err := retry.NewManager()
	require.NoError(t, err)
	_, err = retry.Do(ctx, noStore, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrUnavailable)

	down, err := retry.NewManager(retry.WithStore(&downStore{}))
	require.NoError(t, err)
	_, err = retry.Do(ctx, down, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrUnavailable)
	require.Contains(t, err.Error(), "no servers available")
	require.Zero(t, runs, "fail closed: nothing executes")

	v, err := retry.Do(ctx, down, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.FailOpen())
	require.NoError(t, err)
	require.Equal(t, 1, v)
	require.Equal(t, 1, runs, "fail-open runs without protection")
}

func TestIdempotentTakeoverOfExpiredClaim(t *testing.T) {
	f, store := idemFixture(t, policy(3, 0, 0), retry.WithLease(10*time.Second))
	ctx := context.Background()
	fp := "fp"
	crashed, err := store.Claim(ctx, "k", fp, 10*time.Second)
	require.NoError(t, err)

	fn := func(context.Context) (string, error) { return "done", nil }
	_, err = retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.WithFingerprint(fp))
	require.ErrorIs(t, err, idempotency.ErrInProgress, "a live claim is not taken over")

	f.clk.Advance(10 * time.Second)
	v, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.WithFingerprint(fp))
	require.NoError(t, err)
	require.Equal(t, "done", v)

	events := f.em.Events()
	require.Len(t, events, 2)
	require.Equal(t, audit.ActionTakeover, events[0].Action)
	require.Equal(t, crashed.Owner, events[0].AdditionalContext["previous_owner"])
	require.Equal(t, audit.ActionRecord, events[1].Action)
	require.ErrorIs(t, store.Complete(ctx, crashed, []byte(`"late"`)), idempotency.ErrLeaseLost, "the crashed owner cannot complete")
}

func TestIdempotentLeaseIsRenewedWhileRunning(t *testing.T) {
	f, store := idemFixture(t, policy(3, 0, 0), retry.WithLease(3*time.Second))
	ctx := context.Background()
	release := make(chan struct{})
	ch := start(ctx, f.mgr, func(context.Context) (int, error) { <-release; return 5, nil }, retry.WithIdempotencyKey("k"))

	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Six renewal ticks of 1 s: twice the lease has passed.
	for i := 0; i < 6; i++ {
		require.NoError(t, f.clk.WaitForTimers(wctx, 1))
		require.Equal(t, []time.Duration{time.Second}, f.clk.Pending())
		f.clk.Advance(time.Second)
	}
	require.NoError(t, f.clk.WaitForTimers(wctx, 1)) // the renewal after the sixth tick is done
	rec, err := store.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, idempotency.StateInProgress, rec.State)
	require.True(t, rec.LeaseUntil.After(f.clk.Now()), "lease renewed past now")
	_, err = store.Claim(ctx, "k", rec.Fingerprint, time.Second)
	require.ErrorIs(t, err, idempotency.ErrInProgress, "a living owner is never taken over")

	close(release)
	r := recv(t, ch)
	require.NoError(t, r.err)
	require.Equal(t, 5, r.v)
}

func TestIdempotentLeaseLostStopsRetrying(t *testing.T) {
	f, store := idemFixture(t, policy(5, time.Minute, time.Minute), retry.WithLease(3*time.Second))
	ctx := context.Background()
	runs := atomic.Int64{}
	ch := start(ctx, f.mgr, func(context.Context) (int, error) { runs.Add(1); return 0, io.EOF }, retry.WithIdempotencyKey("k"))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Two timers: the 1 s renewal tick and the 1 min backoff.
	require.NoError(t, f.clk.WaitForTimers(wctx, 2))
	require.NoError(t, store.Clear(ctx, "k")) // an operator clears the key
	f.clk.Advance(time.Second)                // the renewal finds the claim gone
	r := recv(t, ch)
	var re *retry.Error
	require.ErrorAs(t, r.err, &re)
	require.Equal(t, retry.StopLeaseLost, re.Reason)
	require.ErrorIs(t, r.err, idempotency.ErrLeaseLost)
	require.Equal(t, int64(1), runs.Load())
}

func TestIdempotentNotIdempotentWithKeyIsRetried(t *testing.T) {
	f, _ := idemFixture(t, policy(3, 0, 0))
	runs := 0
	v, err := retry.Do(context.Background(), f.mgr, testCat, "charge", func(context.Context) (int, error) {
		runs++
		if runs < 3 {
			return 0, io.EOF
		}
		return runs, nil
	}, retry.NotIdempotent(), retry.WithIdempotencyKey("charge-1"))
	require.NoError(t, err)
	require.Equal(t, 3, v)
}

func TestIdempotentUnencodableResult(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0))
	v, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(context.Context) (func(), error) {
		return func() {}, nil
	}, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrNotRecorded)
	require.NotNil(t, v, "the operation ran: its result is returned with the error")
	_, err = store.Get(context.Background(), "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound)
}

// storeOnly hides every method but those of idempotency.Store, so the
// store is not a Waiter.
type storeOnly struct{ idempotency.Store }

func TestIdempotentWaitForResultGetsTheOwnersResult(t *testing.T) {
	f, _ := idemFixture(t, policy(3, 0, 0))
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	owner := start(ctx, f.mgr, func(context.Context) (order, error) {
		close(started)
		<-release
		return order{ID: "o-1", Total: 5}, nil
	}, retry.WithIdempotencyKey("k"))
	<-started

	waiter := start(ctx, f.mgr, func(context.Context) (order, error) {
		t.Error("the waiter must not run")
		return order{}, nil
	}, retry.WithIdempotencyKey("k"), retry.WaitForResult())
	select {
	case r := <-waiter:
		t.Fatalf("the waiter returned while the owner runs: %+v", r)
	case <-time.After(30 * time.Millisecond):
	}
	close(release)
	require.NoError(t, recv(t, owner).err)
	r := recv(t, waiter)
	require.NoError(t, r.err)
	require.Equal(t, order{ID: "o-1", Total: 5}, r.v)
	hits := f.em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionHit })
	require.Len(t, hits, 1, "the waiter's result is a hit")
}

func TestIdempotentWaitForResultRunsAfterRelease(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0))
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	owner := start(ctx, f.mgr, func(context.Context) (int, error) {
		close(started)
		<-release
		return 0, errors.New("owner failed")
	}, retry.WithIdempotencyKey("k"))
	<-started
	var runs atomic.Int64
	waiter := start(ctx, f.mgr, func(context.Context) (int, error) { runs.Add(1); return 7, nil },
		retry.WithIdempotencyKey("k"), retry.WaitForResult())
	time.Sleep(10 * time.Millisecond)
	close(release)
	require.ErrorIs(t, recv(t, owner).err, retry.ErrExhausted)
	r := recv(t, waiter)
	require.NoError(t, r.err)
	require.Equal(t, 7, r.v)
	require.Equal(t, int64(1), runs.Load(), "the owner released: the waiter claimed the key and ran")
	rec, err := store.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, idempotency.StateCompleted, rec.State)
}

func TestIdempotentWaitForResultTakesOverACrashedOwner(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0), retry.WithLease(10*time.Second))
	ctx := context.Background()
	crashed, err := store.Claim(ctx, "k", "fp", 10*time.Second) // never renewed
	require.NoError(t, err)
	waiter := start(ctx, f.mgr, func(context.Context) (string, error) { return "mine", nil },
		retry.WithIdempotencyKey("k"), retry.WithFingerprint("fp"), retry.WaitForResult())
	time.Sleep(10 * time.Millisecond) // the waiter is waiting
	f.clk.Advance(10 * time.Second)   // the lease ends
	r := recv(t, waiter)
	require.NoError(t, r.err)
	require.Equal(t, "mine", r.v)
	events := f.em.Events()
	require.Len(t, events, 2)
	require.Equal(t, audit.ActionTakeover, events[0].Action)
	require.Equal(t, crashed.Owner, events[0].AdditionalContext["previous_owner"])
	require.Equal(t, audit.ActionRecord, events[1].Action)
}

func TestIdempotentWaitForResultRememberedFailure(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0))
	ctx := context.Background()
	c, err := store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	waiter := start(ctx, f.mgr, func(context.Context) (int, error) { t.Error("must not run"); return 0, nil },
		retry.WithIdempotencyKey("k"), retry.WithFingerprint("fp"), retry.WaitForResult())
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, store.Fail(ctx, c, "card declined"))
	r := recv(t, waiter)
	require.ErrorIs(t, r.err, idempotency.ErrFailed)
	require.Contains(t, r.err.Error(), "card declined")
}

func TestIdempotentWaitForResultIsBoundedByContext(t *testing.T) {
	f, store := idemFixture(t, policy(1, 0, 0))
	_, err := store.Claim(context.Background(), "k", "fp", time.Minute)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err = retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) { t.Error("must not run"); return 0, nil },
		retry.WithIdempotencyKey("k"), retry.WithFingerprint("fp"), retry.WaitForResult())
	require.ErrorIs(t, err, idempotency.ErrInProgress)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestIdempotentWaitForResultNeedsAWaiter(t *testing.T) {
	store := idempotency.NewMemory(nil, 0)
	m, err := retry.NewManager(retry.WithStore(storeOnly{store}), retry.WithDefaultPolicy(policy(1, 0, 0)))
	require.NoError(t, err)
	ctx := context.Background()
	_, err = store.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	start := time.Now()
	_, err = retry.Do(ctx, m, testCat, "op", func(context.Context) (int, error) { return 1, nil },
		retry.WithIdempotencyKey("k"), retry.WithFingerprint("fp"), retry.WaitForResult())
	require.ErrorIs(t, err, idempotency.ErrInProgress, "without a Waiter the call fails at once")
	require.Less(t, time.Since(start), time.Second)
}

// tooSmallStore refuses every result as too large.
type tooSmallStore struct{ *idempotency.Memory }

func (tooSmallStore) Complete(_ context.Context, c idempotency.Claim, result []byte) error {
	return &idempotency.ResultTooLargeError{Key: c.Key, Size: len(result), Max: 1}
}

func TestIdempotentResultTooLargeIsNotRecordedAndReleased(t *testing.T) {
	store := idempotency.NewMemory(nil, 0)
	em := &audit.Memory{}
	m, err := retry.NewManager(retry.WithStore(tooSmallStore{store}), retry.WithEmitter(em), retry.WithDefaultPolicy(policy(1, 0, 0)))
	require.NoError(t, err)
	ctx := context.Background()
	runs := 0
	v, err := retry.Do(ctx, m, testCat, "op", func(context.Context) (string, error) { runs++; return "big", nil }, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrNotRecorded)
	require.ErrorIs(t, err, idempotency.ErrResultTooLarge)
	require.Equal(t, "big", v, "the operation ran: its result comes with the error")
	_, err = store.Get(ctx, "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound, "the claim is released, not left to expire")
	require.Zero(t, em.Len(), "no record event")
}

// corruptStore finds a corrupt record on every claim.
type corruptStore struct{ *idempotency.Memory }

func (corruptStore) Claim(_ context.Context, key, _ string, _ time.Duration) (idempotency.Claim, error) {
	return idempotency.Claim{}, &idempotency.CorruptRecordError{Key: key, Revision: 3, Err: errors.New("bad json")}
}

func TestIdempotentCorruptRecordNeverRuns(t *testing.T) {
	m, err := retry.NewManager(retry.WithStore(corruptStore{idempotency.NewMemory(nil, 0)}))
	require.NoError(t, err)
	fn := func(context.Context) (int, error) { t.Error("must not run"); return 0, nil }
	_, err = retry.Do(context.Background(), m, testCat, "op", fn, retry.WithIdempotencyKey("k"))
	require.ErrorIs(t, err, idempotency.ErrCorrupt)
	require.NotErrorIs(t, err, idempotency.ErrUnavailable)
	_, err = retry.Do(context.Background(), m, testCat, "op", fn, retry.WithIdempotencyKey("k"), retry.FailOpen())
	require.ErrorIs(t, err, idempotency.ErrCorrupt, "fail-open is for an unreachable store, not a bad record")
}
