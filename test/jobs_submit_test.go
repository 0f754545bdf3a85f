package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/jobs"
)

// A fresh job's dispatch carries the job: when its record was never
// written (the submitting process died between its two writes), the
// worker that gets the dispatch writes the record and runs the job.
func TestJobsDispatchWithoutRecordRuns(t *testing.T) {
	e := newJobsEnv(t)
	ctx := context.Background()
	const key = "orphan/dispatch/1"
	body, err := json.Marshal(map[string]any{
		"key": key, "token": "0193b1d2-0000-7000-8000-00000000abcd",
		"job": map[string]any{"queue": "sub", "payload": []byte(`{"n":1}`), "created_at": time.Now().UTC()},
	})
	require.NoError(t, err)
	_, err = e.js.Publish(ctx, jobs.RunSubject("sub"), body)
	require.NoError(t, err)
	_, err = e.c.Get(ctx, key)
	require.ErrorIs(t, err, jobs.ErrNotFound)

	var payload atomic.Value
	startWorker(t, e.c, "sub", func(_ context.Context, j *jobs.Job) error {
		payload.Store(string(j.Payload))
		return nil
	}, jobs.WorkerConfig{Concurrency: 2})
	rec := waitJob(t, e.c, key, 10*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, "sub", rec.Queue)
	require.Equal(t, 1, rec.AttemptCount)
	require.Equal(t, `{"n":1}`, payload.Load())
	require.Len(t, rec.History, 1)
	require.Equal(t, jobs.OutcomeSuccess, rec.History[0].Outcome)

	// Submitting the key now finds the job: nothing new is created.
	got, created, err := e.c.Submit(ctx, "sub", key, nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, jobs.StatusSuccess, got.Status)
}

// A job whose record was written but whose dispatch is gone (its publish
// failed) is dispatched again by the next Submit of its key.
func TestJobsResubmitRedispatchesAStrandedJob(t *testing.T) {
	e := newJobsEnv(t)
	ctx := context.Background()
	const key = "stranded/1"
	rec, created, err := e.c.Submit(ctx, "strand", key, []byte("p"), jobs.SubmitOptions{})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, jobs.StatusPending, rec.Status)

	// Lose the dispatch: no worker exists yet, so it is still queued.
	st, err := e.js.Stream(ctx, jobs.DefaultStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject(jobs.RunSubject("strand"))))

	var runs atomic.Int32
	startWorker(t, e.c, "strand", func(context.Context, *jobs.Job) error {
		runs.Add(1)
		return nil
	}, jobs.WorkerConfig{})
	time.Sleep(300 * time.Millisecond)
	got, err := e.c.Get(ctx, key)
	require.NoError(t, err)
	require.Equal(t, jobs.StatusPending, got.Status, "stranded: no dispatch, no run")
	require.Zero(t, runs.Load())

	again, created, err := e.c.Submit(ctx, "strand", key, []byte("other"), jobs.SubmitOptions{})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, rec.Dispatch, again.Dispatch)
	done := waitJob(t, e.c, key, 10*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, []byte("p"), done.Payload, "the first submit's payload")
	require.Equal(t, 1, done.AttemptCount)
	require.EqualValues(t, 1, runs.Load())
}

// OnOutcome sees each run's outcome as written: a retry (pending), then
// the success.
func TestJobsOnOutcome(t *testing.T) {
	e := newJobsEnv(t)
	ctx := context.Background()
	outcomes := make(chan jobs.Record, 4)
	var calls atomic.Int32
	startWorker(t, e.c, "outc", func(context.Context, *jobs.Job) error {
		if calls.Add(1) == 1 {
			return errors.New("transient")
		}
		return nil
	}, jobs.WorkerConfig{OnOutcome: func(r jobs.Record) { outcomes <- r }})
	_, _, err := e.c.Submit(ctx, "outc", "outcome/1", nil, jobs.SubmitOptions{Policy: jobsPolicy(3)})
	require.NoError(t, err)
	var got []jobs.Record
	for len(got) < 2 {
		select {
		case r := <-outcomes:
			got = append(got, r)
		case <-time.After(10 * time.Second):
			t.Fatalf("outcomes: %+v", got)
		}
	}
	require.Equal(t, jobs.StatusPending, got[0].Status)
	require.Equal(t, jobs.ClassRetryable, got[0].ErrorClass)
	require.False(t, got[0].NextRetryAt.IsZero())
	require.Equal(t, jobs.StatusSuccess, got[1].Status)
	require.Equal(t, 2, got[1].AttemptCount)
	stored, err := e.c.Get(ctx, "outcome/1")
	require.NoError(t, err)
	require.Equal(t, got[1].CurrentRunID, stored.CurrentRunID)
}

// A worker that shuts down hands back the dispatches it fetched ahead, so
// another worker runs those jobs at once instead of after their ack wait.
func TestJobsShutdownHandsBackPrefetched(t *testing.T) {
	e := newJobsEnv(t)
	ctx := context.Background()
	const n = 5
	for i := range n {
		_, _, err := e.c.Submit(ctx, "handback", fmt.Sprintf("handback/%d", i), nil, jobs.SubmitOptions{})
		require.NoError(t, err)
	}
	started := make(chan struct{}, n)
	w, err := jobs.NewWorker(e.c, "handback", func(ctx context.Context, _ *jobs.Job) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, jobs.WorkerConfig{Concurrency: 1, Prefetch: 4, Lease: 20 * time.Second})
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("first worker never started a job")
	}
	time.Sleep(200 * time.Millisecond) // let it fetch ahead
	cancel()
	require.NoError(t, <-ran)
	require.Empty(t, started, "jobs claimed ahead are handed back, not started, at shutdown")

	var done atomic.Int32
	begin := time.Now()
	startWorker(t, e.c, "handback", func(context.Context, *jobs.Job) error {
		done.Add(1)
		return nil
	}, jobs.WorkerConfig{Concurrency: 4, Lease: 20 * time.Second})
	for i := range n {
		waitJob(t, e.c, fmt.Sprintf("handback/%d", i), 8*time.Second, isStatus(jobs.StatusSuccess))
	}
	require.EqualValues(t, n, done.Load())
	require.Less(t, time.Since(begin), 8*time.Second, "well under the 20 s ack wait")
}

// A job claimed ahead of a free slot is running in its record, keeps its
// lease while it waits, and is not started when it is cancelled meanwhile.
func TestJobsClaimedAheadThenCancelledDoesNotRun(t *testing.T) {
	e := newJobsEnv(t)
	ctx, cancelAll := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAll()
	release := make(chan struct{})
	var mu sync.Mutex
	var ran []string
	startWorker(t, e.c, "ahead", func(ctx context.Context, j *jobs.Job) error {
		mu.Lock()
		ran = append(ran, j.Key)
		mu.Unlock()
		if j.Key == "ahead/first" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}, jobs.WorkerConfig{Concurrency: 1, Prefetch: 2, Lease: 3 * time.Second})

	_, _, err := e.c.Submit(ctx, "ahead", "ahead/first", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	waitJob(t, e.c, "ahead/first", 10*time.Second, isStatus(jobs.StatusRunning))
	_, _, err = e.c.Submit(ctx, "ahead", "ahead/second", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	// The only slot is busy: the second job is claimed ahead, running
	// in its record, and its lease is renewed while it waits.
	rec := waitJob(t, e.c, "ahead/second", 10*time.Second, isStatus(jobs.StatusRunning))
	lease := rec.Run.LeaseUntil
	waitJob(t, e.c, "ahead/second", 10*time.Second, func(r jobs.Record) bool {
		return r.Run != nil && r.Run.LeaseUntil.After(lease)
	})

	_, err = e.c.Cancel(ctx, "ahead/second", jobs.WithReason("test"))
	require.NoError(t, err)
	// The claimer notices at its next renewal (every second here).
	time.Sleep(1500 * time.Millisecond)
	close(release)
	waitJob(t, e.c, "ahead/first", 10*time.Second, isStatus(jobs.StatusSuccess))
	_, _, err = e.c.Submit(ctx, "ahead", "ahead/third", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	waitJob(t, e.c, "ahead/third", 10*time.Second, isStatus(jobs.StatusSuccess))

	rec, err = e.c.Get(ctx, "ahead/second")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusFailed, rec.Status)
	require.Equal(t, jobs.TerminalManual, rec.TerminalReason)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"ahead/first", "ahead/third"}, ran, "the cancelled job's handler never ran")
}
