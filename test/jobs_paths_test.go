package test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
)

// The jobs client makes its hot calls through its own request path when
// it talks to JetStream with the default API prefix, and through nats.go's
// KeyValue otherwise (a custom prefix or a domain). Both must behave the
// same: one scenario runs on each.
func TestJobsOnBothRequestPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		js   func(t *testing.T, s *natstest.Server) jetstream.JetStream
	}{
		{"own-requests", func(t *testing.T, s *natstest.Server) jetstream.JetStream {
			_, js := s.JetStream(t)
			return js
		}},
		{"nats.go-keyvalue", func(t *testing.T, s *natstest.Server) jetstream.JetStream {
			// The same API under an explicit prefix: the client cannot
			// assume the default subjects, so it uses nats.go's KeyValue.
			js, err := jetstream.NewWithAPIPrefix(s.Connect(t), "$JS.API")
			require.NoError(t, err)
			return js
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.Start(t)
			js := tc.js(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mem := &audit.Memory{}
			c, err := jobs.New(ctx, js, jobs.Config{Audit: mem})
			require.NoError(t, err)

			var calls atomic.Int32
			startWorker(t, c, "paths", func(_ context.Context, j *jobs.Job) error {
				if calls.Add(1) == 1 {
					return errors.New("transient")
				}
				return nil
			}, jobs.WorkerConfig{Concurrency: 2, Policy: jobsPolicy(3)})

			const key = "paths/1"
			_, created, err := c.Submit(ctx, "paths", key, []byte("p"), jobs.SubmitOptions{})
			require.NoError(t, err)
			require.True(t, created)
			_, created, err = c.Submit(ctx, "paths", key, []byte("other"), jobs.SubmitOptions{})
			require.NoError(t, err)
			require.False(t, created, "a second submit of a pending or running key creates nothing")

			rec := waitJob(t, c, key, 15*time.Second, isStatus(jobs.StatusSuccess))
			require.Equal(t, 2, rec.AttemptCount)
			require.Equal(t, 1, rec.BudgetUsed)
			require.Equal(t, []byte("p"), rec.Payload)
			require.Len(t, rec.History, 2)
			require.Equal(t, jobs.OutcomeFailed, rec.History[0].Outcome)
			require.Equal(t, jobs.OutcomeSuccess, rec.History[1].Outcome)
			require.Len(t, jobEvents(mem, audit.TypeRetryAttempt, key), 1)

			// A deleted record reads as missing, and the key can be
			// submitted again over its delete marker.
			kv, err := js.KeyValue(ctx, jobs.DefaultBucket)
			require.NoError(t, err)
			require.NoError(t, kv.Delete(ctx, jobs.ID(key)))
			_, err = c.Get(ctx, key)
			require.ErrorIs(t, err, jobs.ErrNotFound)
			rec, created, err = c.Submit(ctx, "paths", key, []byte("again"), jobs.SubmitOptions{})
			require.NoError(t, err)
			require.True(t, created)
			require.Equal(t, 0, rec.AttemptCount)
			rec = waitJob(t, c, key, 15*time.Second, isStatus(jobs.StatusSuccess))
			require.Equal(t, []byte("again"), rec.Payload)
			require.Equal(t, 3, int(calls.Load()))
		})
	}
}

// A job whose record an operator deleted stays deleted: its dispatch,
// which carries the job, is redelivered a few times while the record is
// missing and then dropped, without running the handler.
func TestJobsDeletedJobStaysDeleted(t *testing.T) {
	e := newJobsEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const key = "deleted/1"
	_, created, err := e.c.Submit(ctx, "del", key, []byte("p"), jobs.SubmitOptions{})
	require.NoError(t, err)
	require.True(t, created)
	kv, err := e.js.KeyValue(ctx, jobs.DefaultBucket)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, jobs.ID(key)))

	var calls atomic.Int32
	startWorker(t, e.c, "del", func(context.Context, *jobs.Job) error {
		calls.Add(1)
		return nil
	}, jobs.WorkerConfig{MissingDeliveries: 3, MissingDelay: 100 * time.Millisecond})

	require.Eventually(t, func() bool {
		cons, err := e.js.Consumer(ctx, jobs.DefaultStream, jobs.ConsumerName("del"))
		if err != nil {
			return false // the worker is still creating it
		}
		ci, err := cons.Info(ctx)
		return err == nil && ci.Delivered.Consumer >= 3 && ci.NumPending == 0 && ci.NumAckPending == 0
	}, 10*time.Second, 50*time.Millisecond, "the dispatch is delivered 3 times, then dropped")
	_, err = e.c.Get(ctx, key)
	require.ErrorIs(t, err, jobs.ErrNotFound)
	require.Zero(t, calls.Load())
}
