package test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

func TestJobsRequeueOnlyWayOutOfFailed(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	var fail atomic.Bool
	fail.Store(true)
	var calls atomic.Int32
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		calls.Add(1)
		if fail.Load() {
			return retry.Permanent(errors.New("broken"))
		}
		return nil
	}, jobs.WorkerConfig{Policy: jobsPolicy(3)})
	_, _, err := env.c.Submit(ctx, "q", "rq", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	waitJob(t, env.c, "rq", 10*time.Second, isStatus(jobs.StatusFailed))

	// A second submit does not revive it, and no worker picks it up.
	rec, created, err := env.c.Submit(ctx, "q", "rq", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, jobs.StatusFailed, rec.Status)
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, int32(1), calls.Load())
	rec, err = env.c.Get(ctx, "rq")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusFailed, rec.Status)

	_, err = env.c.Reprocess(ctx, "rq")
	require.ErrorIs(t, err, jobs.ErrInvalidTransition)

	fail.Store(false)
	rec, err = env.c.Requeue(ctx, "rq", jobs.WithReason("upstream fixed"), jobs.WithOperator("alice"))
	require.NoError(t, err)
	require.Equal(t, jobs.StatusPending, rec.Status)
	require.False(t, rec.Terminal)
	got := waitJob(t, env.c, "rq", 10*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, 2, got.AttemptCount)
	require.Len(t, got.History, 2)

	_, err = env.c.Requeue(ctx, "rq")
	require.ErrorIs(t, err, jobs.ErrInvalidTransition)
	var te *jobs.TransitionError
	require.ErrorAs(t, err, &te)
	require.Equal(t, jobs.StatusSuccess, te.From)
	_, err = env.c.Requeue(ctx, "missing")
	require.ErrorIs(t, err, jobs.ErrNotFound)

	ov := jobEvents(env.audit, audit.TypeManualOverride, "rq")
	require.Len(t, ov, 1)
	require.Equal(t, "requeue", ov[0].AdditionalContext["override"])
	require.Equal(t, "upstream fixed", ov[0].AdditionalContext["reason"])
	require.Equal(t, "alice", ov[0].AdditionalContext["operator"])
}

func TestJobsRequeueOfPendingRefused(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	_, _, err := env.c.Submit(ctx, "idle", "p", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	_, err = env.c.Requeue(ctx, "p")
	require.ErrorIs(t, err, jobs.ErrInvalidTransition)

	rec, err := env.c.Cancel(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusFailed, rec.Status)
	require.Equal(t, jobs.TerminalManual, rec.TerminalReason)
	terminal := true
	list, err := env.c.List(ctx, jobs.Filter{Queue: "idle", Status: jobs.StatusFailed, Terminal: &terminal})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = env.c.List(ctx, jobs.Filter{Status: jobs.StatusPending})
	require.NoError(t, err)
	require.Empty(t, list)
}

func TestJobsReprocess(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	var mode atomic.Int32 // 0 succeed, 1 fail finally
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		if mode.Load() == 1 {
			return retry.Permanent(errors.New("reprocess broke"))
		}
		return nil
	}, jobs.WorkerConfig{Policy: jobsPolicy(3)})
	_, _, err := env.c.Submit(ctx, "q", "rp", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	first := waitJob(t, env.c, "rp", 10*time.Second, isStatus(jobs.StatusSuccess))

	// A failing reprocess leaves the earlier success current.
	mode.Store(1)
	_, err = env.c.Reprocess(ctx, "rp")
	require.NoError(t, err)
	got := waitJob(t, env.c, "rp", 10*time.Second, func(r jobs.Record) bool { return r.AttemptCount == 2 && r.Status == jobs.StatusSuccess })
	require.Equal(t, first.CurrentRunID, got.CurrentRunID)
	require.Equal(t, jobs.OutcomeFailed, got.History[1].Outcome)
	require.True(t, got.History[1].Reprocess)
	require.False(t, got.Terminal)

	// A succeeding reprocess replaces it.
	mode.Store(0)
	_, err = env.c.Reprocess(ctx, "rp")
	require.NoError(t, err)
	got = waitJob(t, env.c, "rp", 10*time.Second, func(r jobs.Record) bool { return r.AttemptCount == 3 && r.Status == jobs.StatusSuccess })
	require.Equal(t, got.History[2].RunID, got.CurrentRunID)
	require.NotEqual(t, first.CurrentRunID, got.CurrentRunID)
	dl, err := env.c.DeadLetters(ctx, "q", 0)
	require.NoError(t, err)
	require.Empty(t, dl)
}

func TestJobsCancelRunning(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	started := make(chan struct{})
	ended := make(chan error, 1)
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		close(started)
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	}, jobs.WorkerConfig{Policy: jobsPolicy(3), Lease: time.Second})
	_, _, err := env.c.Submit(ctx, "q", "cx", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	<-started
	rec, err := env.c.Cancel(ctx, "cx")
	require.NoError(t, err)
	require.Equal(t, jobs.OutcomeCancelled, rec.History[0].Outcome)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("handler context not cancelled")
	}
	time.Sleep(500 * time.Millisecond)
	got, err := env.c.Get(ctx, "cx")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusFailed, got.Status)
	require.Equal(t, jobs.TerminalManual, got.TerminalReason)
	require.Equal(t, 1, got.AttemptCount)
}

// TestJobsNoConcurrentRunsPerKey runs 8 workers in two "processes" (two
// connections, each with its own client and Worker of concurrency 4),
// with jobs that fail sometimes, and checks that no key ever runs twice at
// once.
func TestJobsNoConcurrentRunsPerKey(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	const n = 40
	var mu sync.Mutex
	inflight := map[string]*atomic.Int32{}
	var violations, successes atomic.Int32
	var failedOnce sync.Map
	h := func(ctx context.Context, j *jobs.Job) error {
		mu.Lock()
		c := inflight[j.Key]
		if c == nil {
			c = &atomic.Int32{}
			inflight[j.Key] = c
		}
		mu.Unlock()
		if c.Add(1) > 1 {
			violations.Add(1)
		}
		defer c.Add(-1)
		time.Sleep(20 * time.Millisecond)
		if _, loaded := failedOnce.LoadOrStore(j.Key, true); !loaded && len(j.Key)%2 == 0 {
			return errors.New("first try fails")
		}
		successes.Add(1)
		return nil
	}
	for range 2 {
		_, js := env.s.JetStream(t)
		c, err := jobs.New(ctx, js, jobs.Config{})
		require.NoError(t, err)
		startWorker(t, c, "q", h, jobs.WorkerConfig{Concurrency: 4, Policy: jobsPolicy(3), Lease: 2 * time.Second})
	}
	for i := range n {
		key := fmt.Sprintf("k-%d", i)
		// Submit each key twice, concurrently, to add stray dispatches.
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				_, _, err := env.c.Submit(ctx, "q", key, nil, jobs.SubmitOptions{})
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	require.Eventually(t, func() bool {
		l, err := env.c.List(ctx, jobs.Filter{Status: jobs.StatusSuccess})
		return err == nil && len(l) == n
	}, 20*time.Second, 100*time.Millisecond)
	require.Zero(t, violations.Load())
	require.Equal(t, int32(n), successes.Load())
}

// TestJobsFenceEndsARunThatCannotRenew shuts the server down while a
// handler runs: its worker cannot renew the lease, so the handler's context
// ends with the lease, before any other worker could take the job over.
func TestJobsFenceEndsARunThatCannotRenew(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	started := make(chan time.Time, 1)
	ended := make(chan time.Time, 1)
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		if j.Attempt == 1 {
			started <- time.Now()
			<-ctx.Done()
			ended <- time.Now()
			return ctx.Err()
		}
		return nil
	}, jobs.WorkerConfig{Lease: 2 * time.Second, Policy: jobsPolicy(3)})
	_, _, err := env.c.Submit(ctx, "q", "fenced", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	var t0 time.Time
	select {
	case t0 = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start")
	}
	env.s.Shutdown()
	defer env.s.Up()
	select {
	case t1 := <-ended:
		// The lease was 2 s from the claim, just before t0; the fence ends
		// the run a tenth of a lease early.
		require.Less(t, t1.Sub(t0), 2*time.Second, "the run ended before its lease")
	case <-time.After(10 * time.Second):
		t.Fatal("the handler ran on past its lease with the server down")
	}
}
