package test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/jobs"
)

// loseDispatches purges the queued dispatches of queue, as a crash between
// a record write and its dispatch, or an operator's purge, would.
func loseDispatches(t *testing.T, e *jobsEnv, queue string) {
	t.Helper()
	st, err := e.js.Stream(context.Background(), jobs.DefaultStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(context.Background(), jetstream.WithPurgeSubject(jobs.RunSubject(queue))))
}

func queuedDispatches(t *testing.T, e *jobsEnv, queue string) uint64 {
	t.Helper()
	st, err := e.js.Stream(context.Background(), jobs.DefaultStream)
	require.NoError(t, err)
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(jobs.RunSubject(queue)))
	require.NoError(t, err)
	return info.State.Subjects[jobs.RunSubject(queue)]
}

func TestJobsSweepDispatchesStrandedJobsOnly(t *testing.T) {
	e := newJobsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := e.c.Submit(ctx, "sweep", "sweep/lost", []byte("p"), jobs.SubmitOptions{})
	require.NoError(t, err)
	loseDispatches(t, e, "sweep")
	// Submitted after the purge, later than the lost job's due time plus
	// the grace used below: its dispatch is queued, and the run subject
	// holds nothing as old as the lost job's.
	time.Sleep(1200 * time.Millisecond)
	_, _, err = e.c.Submit(ctx, "sweep", "sweep/queued", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	// Another queue's stranded job is out of a queue-limited sweep.
	_, _, err = e.c.Submit(ctx, "other", "other/lost", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	loseDispatches(t, e, "other")

	// Not yet past the grace: nothing is stranded.
	found, err := e.c.Sweep(ctx, jobs.SweepOptions{Queue: "sweep", Grace: time.Hour})
	require.NoError(t, err)
	require.Empty(t, found)

	time.Sleep(1200 * time.Millisecond)
	found, err = e.c.Sweep(ctx, jobs.SweepOptions{Queue: "sweep", Grace: time.Second, DryRun: true})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.Equal(t, "sweep/lost", found[0].Key)
	require.EqualValues(t, 1, queuedDispatches(t, e, "sweep"), "a dry run dispatches nothing")

	found, err = e.c.Sweep(ctx, jobs.SweepOptions{Queue: "sweep", Grace: time.Second})
	require.NoError(t, err)
	require.Len(t, found, 1)
	require.EqualValues(t, 2, queuedDispatches(t, e, "sweep"))
	require.EqualValues(t, 0, queuedDispatches(t, e, "other"))

	var runs atomic.Int32
	startWorker(t, e.c, "sweep", func(context.Context, *jobs.Job) error {
		runs.Add(1)
		return nil
	}, jobs.WorkerConfig{Concurrency: 2})
	for _, key := range []string{"sweep/lost", "sweep/queued"} {
		rec := waitJob(t, e.c, key, 10*time.Second, isStatus(jobs.StatusSuccess))
		require.Equal(t, 1, rec.AttemptCount)
	}
	require.EqualValues(t, 2, runs.Load())

	_, err = e.c.Sweep(ctx, jobs.SweepOptions{Grace: -time.Second})
	require.ErrorIs(t, err, jobs.ErrInvalidConfig)
}

// A worker with SweepEvery repairs its queue's stranded jobs by itself.
func TestJobsWorkerSweepsItsQueue(t *testing.T) {
	e := newJobsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _, err := e.c.Submit(ctx, "selfheal", "selfheal/1", nil, jobs.SubmitOptions{})
	require.NoError(t, err)
	loseDispatches(t, e, "selfheal")
	startWorker(t, e.c, "selfheal", func(context.Context, *jobs.Job) error { return nil },
		jobs.WorkerConfig{Lease: time.Second, SweepEvery: 300 * time.Millisecond})
	rec := waitJob(t, e.c, "selfheal/1", 10*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, 1, rec.AttemptCount)
}
