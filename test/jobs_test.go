package test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

func TestJobsBackoffSchedule(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	var calls atomic.Int32
	var runIDs []string
	var starts []time.Time
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		runIDs = append(runIDs, j.RunID)
		starts = append(starts, time.Now())
		if calls.Add(1) <= 2 {
			return errors.New("transient")
		}
		return nil
	}, jobs.WorkerConfig{Policy: jobsPolicy(5), Lease: 3 * time.Second})

	rec, created, err := env.c.Submit(ctx, "q", "src/cust/query/2026-11-20", []byte(`{"n":1}`), jobs.SubmitOptions{})
	require.NoError(t, err)
	require.True(t, created)
	again, created, err := env.c.Submit(ctx, "q", "src/cust/query/2026-11-20", []byte(`{"n":2}`), jobs.SubmitOptions{})
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, rec.ID, again.ID)

	got := waitJob(t, env.c, rec.Key, 15*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, 3, got.AttemptCount)
	require.Equal(t, 2, got.BudgetUsed)
	require.Len(t, got.History, 3)
	require.Equal(t, []jobs.Outcome{jobs.OutcomeFailed, jobs.OutcomeFailed, jobs.OutcomeSuccess},
		[]jobs.Outcome{got.History[0].Outcome, got.History[1].Outcome, got.History[2].Outcome})
	seen := map[string]bool{}
	for i, r := range got.History {
		require.False(t, seen[r.RunID], "run ids are distinct")
		seen[r.RunID] = true
		require.Equal(t, i+1, r.Attempt)
	}
	require.Equal(t, got.History[2].RunID, got.CurrentRunID)
	require.Equal(t, `{"n":1}`, string(got.Payload))
	require.Equal(t, int32(3), calls.Load())
	// Backoff: ~1 s then ~2 s (whole seconds, schedules may fire early by <1 s).
	gap1, gap2 := starts[1].Sub(starts[0]), starts[2].Sub(starts[1])
	require.Greater(t, gap1, 300*time.Millisecond)
	require.Less(t, gap1, 3*time.Second)
	require.Greater(t, gap2, 1200*time.Millisecond)
	require.Less(t, gap2, 4*time.Second)
	attempts := jobEvents(env.audit, audit.TypeRetryAttempt, rec.Key)
	require.Len(t, attempts, 2)
	require.Equal(t, 1, attempts[0].AttemptNumber)
	require.Equal(t, 2, attempts[1].AttemptNumber)
	require.InDelta(t, 1.0, attempts[0].DelaySeconds, 1.0)
	require.InDelta(t, 2.0, attempts[1].DelaySeconds, 1.0)
	require.True(t, got.NextRetryAt.IsZero())
}

func TestJobsRateLimitedKeepsBudget(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	var calls atomic.Int32
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		if calls.Add(1) <= 2 {
			return retry.RateLimited(errors.New("429"), 500*time.Millisecond)
		}
		return nil
	}, jobs.WorkerConfig{Policy: jobsPolicy(2)})
	_, _, err := env.c.Submit(ctx, "q", "rl", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	got := waitJob(t, env.c, "rl", 10*time.Second, isStatus(jobs.StatusSuccess))
	// Two rate-limited failures with a budget of 2 attempts: the budget
	// was never charged.
	require.Equal(t, 3, got.AttemptCount)
	require.Equal(t, 0, got.BudgetUsed)
	require.Equal(t, jobs.ClassRateLimited, got.History[0].ErrorClass)
	require.Equal(t, jobs.ClassRateLimited, got.History[1].ErrorClass)
}

func TestJobsFinalNotRetried(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	var calls atomic.Int32
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		calls.Add(1)
		return retry.Permanent(errors.New("bad input"))
	}, jobs.WorkerConfig{Policy: jobsPolicy(5)})
	_, _, err := env.c.Submit(ctx, "q", "final", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	got := waitJob(t, env.c, "final", 10*time.Second, isStatus(jobs.StatusFailed))
	require.Equal(t, 1, got.AttemptCount)
	require.True(t, got.Terminal)
	require.Equal(t, jobs.TerminalFinal, got.TerminalReason)
	require.Equal(t, jobs.ClassFinal, got.ErrorClass)
	require.Eventually(t, func() bool {
		dl, err := env.c.DeadLetters(ctx, "q", 0)
		return err == nil && len(dl) == 1 && dl[0].Key == "final"
	}, 5*time.Second, 50*time.Millisecond)
	ex := jobEvents(env.audit, audit.TypeRetryExhausted, "final")
	require.Len(t, ex, 1)
	require.Equal(t, "final", ex[0].StopReason)
	require.Equal(t, 1, ex[0].TotalAttempts)
	time.Sleep(1500 * time.Millisecond)
	require.Equal(t, int32(1), calls.Load())
}

func TestJobsExhaustionDeadLetters(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	startWorker(t, env.c, "q", func(ctx context.Context, j *jobs.Job) error {
		return errors.New("still broken")
	}, jobs.WorkerConfig{Policy: jobsPolicy(2)})
	_, _, err := env.c.Submit(ctx, "q", "exh", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	got := waitJob(t, env.c, "exh", 10*time.Second, isStatus(jobs.StatusFailed))
	require.Equal(t, 2, got.AttemptCount)
	require.Equal(t, jobs.TerminalMaxAttempts, got.TerminalReason)
	var dl []jobs.Record
	require.Eventually(t, func() bool {
		dl, err = env.c.DeadLetters(ctx, "q", 0)
		return err == nil && len(dl) == 1
	}, 5*time.Second, 50*time.Millisecond)
	require.Len(t, dl[0].History, 2)
	require.Equal(t, "still broken", dl[0].History[1].Error)
	ex := jobEvents(env.audit, audit.TypeRetryExhausted, "exh")
	require.Len(t, ex, 1)
	require.Equal(t, "max_attempts", ex[0].StopReason)
	require.Len(t, jobEvents(env.audit, audit.TypeRetryAttempt, "exh"), 1)
}
