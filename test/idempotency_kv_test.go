package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/idempotency/storetest"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/retry"
)

const idemCat retry.Category = "IDEMPOTENCY_IT"

// idemCtx is a context that ends with the test, bounded by d.
func idemCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// idemPolicy retries at once, up to attempts times.
func idemPolicy(attempts int) retry.Policy {
	return retry.Policy{MaxAttempts: attempts, Multiplier: 2}
}

// errFlaky is a retryable failure that happens before the side effect.
var errFlaky = errors.New("flaky dependency")

// TestIdempotencyKVExactlyOnce runs every key's side effect exactly once
// although each key is submitted at least twice, concurrently, from four
// "processes" (each its own connection, store and manager on one bucket),
// while 30% of attempts fail. One copy of each key waits for a running
// owner's result; the others submit again while it runs.
func TestIdempotencyKVExactlyOnce(t *testing.T) {
	const (
		keys       = 2000
		workers    = 32
		processes  = 4
		failRate   = 0.3
		maxSubmits = 50 // per submission: bounded, though a few suffice
	)
	srv := natstest.Start(t)
	ctx := idemCtx(t, 60*time.Second)
	bucket := "IT_EXACTLY_ONCE"
	managers := make([]*retry.Manager, processes)
	stores := make([]*idempotency.KV, processes)
	em := &audit.Memory{}
	for p := range managers {
		_, js := srv.JetStream(t)
		kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: bucket})
		require.NoError(t, err)
		stores[p] = kv
		managers[p], err = retry.NewManager(retry.WithStore(kv), retry.WithEmitter(em), retry.WithDefaultPolicy(idemPolicy(4)))
		require.NoError(t, err)
	}

	var effects [keys]atomic.Int64 // successful executions per key
	var attempts, inProgress, exhausted, submitted atomic.Int64
	// Each key's first two copies are queued side by side, so that two
	// workers run them at the same time; every fourth key gets a third
	// copy, late.
	type job struct{ key, copy int }
	jobs := make(chan job, keys*3)
	for _, k := range rand.Perm(keys) {
		jobs <- job{k, 0}
		jobs <- job{k, 1}
	}
	for _, k := range rand.Perm(keys) {
		if k%4 == 0 {
			jobs <- job{k, 2}
		}
	}
	close(jobs)

	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := managers[w%processes]
			for j := range jobs {
				key := fmt.Sprintf("order-%04d", j.key)
				opts := []retry.Option{retry.WithIdempotencyKey(key), retry.WithFingerprint("fp-" + key)}
				if j.copy == 1 {
					opts = append(opts, retry.WaitForResult())
				}
				fn := func(context.Context) (string, error) {
					attempts.Add(1)
					time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond) // the work
					if rand.Float64() < failRate {
						return "", errFlaky
					}
					effects[j.key].Add(1)
					return "receipt-" + key, nil
				}
				var done bool
				for try := 0; try < maxSubmits && !done; try++ {
					v, err := retry.Do(ctx, m, idemCat, "charge", fn, opts...)
					switch {
					case err == nil:
						if v != "receipt-"+key {
							errs <- fmt.Errorf("key %s: got %q", key, v)
							return
						}
						done = true
						submitted.Add(1)
					case errors.Is(err, retry.ErrExhausted):
						exhausted.Add(1) // the claim was released: submit again
					case errors.Is(err, idempotency.ErrInProgress):
						inProgress.Add(1) // another worker runs it: submit again
						time.Sleep(time.Millisecond)
					default:
						errs <- fmt.Errorf("key %s: %w", key, err)
						return
					}
				}
				if !done {
					errs <- fmt.Errorf("key %s: not done after %d submissions", key, maxSubmits)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	for k := range effects {
		require.Equal(t, int64(1), effects[k].Load(), "key %d ran %d times", k, effects[k].Load())
	}
	for k := 0; k < keys; k++ {
		rec, err := stores[k%processes].Get(ctx, fmt.Sprintf("order-%04d", k))
		require.NoError(t, err)
		require.Equal(t, idempotency.StateCompleted, rec.State)
		require.JSONEq(t, fmt.Sprintf(`"receipt-order-%04d"`, k), string(rec.Result))
	}
	t.Logf("%d keys, %d attempts; resubmitted %d times after exhaustion, %d times while in progress",
		keys, attempts.Load(), exhausted.Load(), inProgress.Load())
	require.Positive(t, inProgress.Load(), "duplicates ran concurrently")
	count := func(a audit.Action) int {
		return len(em.Filter(func(e audit.Event) bool { return e.Action == a }))
	}
	require.Equal(t, keys, count(audit.ActionRecord), "one recorded result per key")
	require.Equal(t, int(submitted.Load())-keys, count(audit.ActionHit), "every other submission is a hit")
	require.Zero(t, count(audit.ActionTakeover), "no owner lost its lease")
}

// TestIdempotencyKVOrphanTakeover: an owner claims a key and dies (it
// never renews). Once its lease has passed on the store's clock, a call
// takes the key over, audits the takeover with the previous owner, and
// runs; the dead owner can no longer complete.
func TestIdempotencyKVOrphanTakeover(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.JetStream(t)
	ctx := idemCtx(t, 30*time.Second)
	clk := storetest.NewClock(time.Now())
	store, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: "IT_ORPHAN", Now: clk.Now})
	require.NoError(t, err)
	em := &audit.Memory{}
	const lease = 10 * time.Second
	m, err := retry.NewManager(retry.WithStore(store), retry.WithEmitter(em), retry.WithLease(lease),
		retry.WithDefaultPolicy(idemPolicy(3)))
	require.NoError(t, err)
	key, err := idempotency.Key("ship_order", "tenant-1", "corr-1", map[string]any{"order": "o-7"})
	require.NoError(t, err)
	opts := []retry.Option{retry.WithIdempotencyKey(key), retry.WithFingerprint("fp"), retry.WithTenant("tenant-1")}

	crashed, err := store.Claim(ctx, key, "fp", lease)
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, crashed.Status)

	var runs atomic.Int64
	ship := func(context.Context) (string, error) { runs.Add(1); return "shipped", nil }
	_, err = retry.Do(ctx, m, idemCat, "ship", ship, opts...)
	require.ErrorIs(t, err, idempotency.ErrInProgress, "the lease is live")

	clk.Advance(lease - time.Millisecond)
	_, err = retry.Do(ctx, m, idemCat, "ship", ship, opts...)
	require.ErrorIs(t, err, idempotency.ErrInProgress, "a millisecond before the lease ends")
	require.Zero(t, runs.Load())

	clk.Advance(time.Millisecond)
	v, err := retry.Do(ctx, m, idemCat, "ship", ship, opts...)
	require.NoError(t, err)
	require.Equal(t, "shipped", v)
	require.Equal(t, int64(1), runs.Load())

	takeovers := em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionTakeover })
	require.Len(t, takeovers, 1)
	e := takeovers[0]
	require.Equal(t, audit.TypeIdempotency, e.Type)
	require.Equal(t, key, e.IdempotencyKey)
	require.Equal(t, "tenant-1", e.TenantID)
	require.Equal(t, crashed.Owner, e.AdditionalContext["previous_owner"])
	require.NoError(t, e.Validate())
	require.Len(t, em.Filter(func(e audit.Event) bool { return e.Action == audit.ActionRecord }), 1)

	require.ErrorIs(t, store.Complete(ctx, crashed, []byte(`"late"`)), idempotency.ErrLeaseLost, "the dead owner cannot complete")
	require.ErrorIs(t, store.Release(ctx, crashed), idempotency.ErrLeaseLost)
	rec, err := store.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, idempotency.StateCompleted, rec.State)
	require.Equal(t, `"shipped"`, string(rec.Result))

	v, err = retry.Do(ctx, m, idemCat, "ship", ship, opts...)
	require.NoError(t, err)
	require.Equal(t, "shipped", v)
	require.Equal(t, int64(1), runs.Load(), "later calls are hits")
}

// TestIdempotencyKVLeaseRenewal: with a short real lease, a call that runs
// for several leases renews its claim, so a concurrent claimer sees it in
// progress throughout and never takes it over.
func TestIdempotencyKVLeaseRenewal(t *testing.T) {
	const (
		lease = 300 * time.Millisecond
		work  = time.Second
	)
	srv := natstest.Start(t)
	_, js1 := srv.JetStream(t)
	_, js2 := srv.JetStream(t)
	ctx := idemCtx(t, 30*time.Second)
	owner, err := idempotency.NewKV(ctx, js1, idempotency.KVConfig{Bucket: "IT_RENEWAL", Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	other, err := idempotency.NewKV(ctx, js2, idempotency.KVConfig{Bucket: "IT_RENEWAL"})
	require.NoError(t, err)
	m, err := retry.NewManager(retry.WithStore(owner), retry.WithLease(lease), retry.WithDefaultPolicy(idemPolicy(1)))
	require.NoError(t, err)

	started := make(chan struct{})
	type outcome struct {
		v   int
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		v, err := retry.Do(ctx, m, idemCat, "report", func(ctx context.Context) (int, error) {
			close(started)
			select {
			case <-time.After(work):
				return 42, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}, retry.WithIdempotencyKey("report-1"), retry.WithFingerprint("fp"))
		done <- outcome{v, err}
	}()
	<-started

	var tries int
	var revisions []uint64
	var res outcome
	for running := true; running; {
		select {
		case res = <-done:
			running = false
		case <-time.After(20 * time.Millisecond):
			c, err := other.Claim(ctx, "report-1", "fp", lease)
			if err == nil && c.Status == idempotency.Completed {
				continue // finished between the tick and the claim
			}
			require.ErrorIs(t, err, idempotency.ErrInProgress, "claim %d: a live owner is never taken over (status %s)", tries, c.Status)
			tries++
			if rec, err := other.Get(ctx, "report-1"); err == nil && rec.State == idempotency.StateInProgress {
				if n := len(revisions); n == 0 || revisions[n-1] != rec.Revision {
					revisions = append(revisions, rec.Revision)
				}
			}
		}
	}
	require.NoError(t, res.err)
	require.Equal(t, 42, res.v)
	require.Greater(t, tries, 10)
	require.GreaterOrEqual(t, len(revisions), 3, "the owner renewed its claim (revisions %v)", revisions)

	hit, err := other.Claim(ctx, "report-1", "fp", lease)
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, hit.Status)
	require.Equal(t, `42`, string(hit.Result))
}
