package test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/jobs"
)

// TestJobsServerRestartLosesNothing restarts the embedded server while
// jobs flow; every job reaches success, and each handler succeeds once.
// Exactly-once handler success holds while the lease outlives the outage:
// a run whose lease ends while its worker cannot write is taken over.
func TestJobsServerRestartLosesNothing(t *testing.T) {
	env := newJobsEnv(t)
	ctx := context.Background()
	const n = 60
	var mu sync.Mutex
	succ := map[string]int{}
	var calls atomic.Int32
	_, js := env.s.JetStream(t, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	wc, err := jobs.New(ctx, js, jobs.Config{})
	require.NoError(t, err)
	startWorker(t, wc, "q", func(ctx context.Context, j *jobs.Job) error {
		if calls.Add(1)%7 == 0 {
			return errors.New("flaky")
		}
		time.Sleep(30 * time.Millisecond)
		mu.Lock()
		succ[j.Key]++
		mu.Unlock()
		return nil
	}, jobs.WorkerConfig{Concurrency: 4, Policy: jobsPolicy(5), Lease: 10 * time.Second})

	submit := func(from, to int) {
		for i := from; i < to; i++ {
			key := fmt.Sprintf("r-%d", i)
			require.Eventually(t, func() bool {
				sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				defer cancel()
				_, _, err := env.c.Submit(sctx, "q", key, nil, jobs.SubmitOptions{})
				return err == nil
			}, 20*time.Second, 100*time.Millisecond)
		}
	}
	submit(0, n/2)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	before := len(succ)
	mu.Unlock()
	env.s.Restart()
	t.Logf("restarted with %d of %d submitted jobs done", before, n/2)
	submit(n/2, n)

	require.Eventually(t, func() bool {
		l, err := env.c.List(ctx, jobs.Filter{Status: jobs.StatusSuccess})
		return err == nil && len(l) == n
	}, 40*time.Second, 200*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, succ, n)
	for k, c := range succ {
		if c != 1 {
			rec, _ := env.c.Get(ctx, k)
			t.Logf("history of %s: %+v", k, rec.History)
		}
		require.Equal(t, 1, c, "job %s succeeded %d times", k, c)
	}
}
