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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

// Durable jobs on a 3-server JetStream cluster with replicas 3: two
// workers connected to different servers share a queue, keys are
// submitted through both, and the server leading the job bucket is shut
// down mid-run. Every job succeeds, no key runs twice at once, and every
// run is counted in attempt_count.
func TestJobsOnACluster(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	connect := func(first int) jetstream.JetStream { return clusterJS(t, servers, first) }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	jsA, jsB := connect(0), connect(2)
	cA, err := jobs.New(ctx, jsA, jobs.Config{Replicas: 3})
	require.NoError(t, err)
	cB, err := jobs.New(ctx, jsB, jobs.Config{Replicas: 3})
	require.NoError(t, err)

	var (
		running  sync.Map // key → struct{}: runs in progress
		overlaps atomic.Int32
		mu       sync.Mutex
		runs     = map[string]int{}
		finished atomic.Int32
	)
	handler := func(_ context.Context, j *jobs.Job) error {
		if _, busy := running.LoadOrStore(j.Key, struct{}{}); busy {
			overlaps.Add(1)
		}
		time.Sleep(2 * time.Millisecond)
		running.Delete(j.Key)
		mu.Lock()
		runs[j.Key]++
		mu.Unlock()
		finished.Add(1)
		return nil
	}
	cfg := jobs.WorkerConfig{Concurrency: 4, Lease: 5 * time.Second}
	startWorker(t, cA, "cluster", handler, cfg)
	startWorker(t, cB, "cluster", handler, cfg)

	const n = 200
	key := func(i int) string { return fmt.Sprintf("cluster/%d", i) }
	for i := range n {
		first, second := cA, cB
		if i%2 == 1 {
			first, second = cB, cA
		}
		created := submitRetrying(ctx, t, first, "cluster", key(i))
		// The same key through the other server creates nothing. (A
		// submit that failed in the failover may still have created the
		// job, from its dispatch: then no call reports it created; the
		// job's success is checked below.)
		again := submitRetrying(ctx, t, second, "cluster", key(i))
		require.False(t, created && again, "%s created twice", key(i))
		if i == n/2 {
			// Fail the bucket's stream leader over mid-run.
			st, err := jsA.Stream(ctx, "KV_"+jobs.DefaultBucket)
			require.NoError(t, err)
			info, err := st.Info(ctx)
			require.NoError(t, err)
			require.NotNil(t, info.Cluster)
			killed := false
			for _, s := range servers {
				if s.Name() == info.Cluster.Leader {
					s.Shutdown()
					killed = true
				}
			}
			require.True(t, killed, "leader %q is one of the servers", info.Cluster.Leader)
			t.Logf("shut down %s, the bucket's leader, after %d jobs finished", info.Cluster.Leader, finished.Load())
		}
	}
	attempts := 0
	for i := range n {
		rec := waitJob(t, cA, key(i), 60*time.Second, isStatus(jobs.StatusSuccess))
		attempts += rec.AttemptCount
		mu.Lock()
		r := runs[key(i)]
		mu.Unlock()
		require.GreaterOrEqual(t, r, 1, key(i))
		require.LessOrEqual(t, r, rec.AttemptCount, "%s: every run is counted", key(i))
	}
	require.Zero(t, overlaps.Load(), "a key ran twice at once")
	t.Logf("%d jobs, %d runs, %d attempts", n, finished.Load(), attempts)
}

// submitRetrying submits key as a careful caller does: each call bounded,
// and submitted again after ErrUnavailable (a failover can lose a
// request), since submitting is idempotent. It reports whether a call
// created the job.
func submitRetrying(ctx context.Context, t *testing.T, c *jobs.Client, queue, key string) bool {
	t.Helper()
	created := false
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, ok, err := c.Submit(cctx, queue, key, nil, jobs.SubmitOptions{})
		cancel()
		created = created || ok
		if err == nil {
			return created
		}
		require.ErrorIs(t, err, jobs.ErrUnavailable)
		require.Less(t, attempt, 10, "%s: %v", key, err)
		t.Logf("%s: submitting again after %v", key, err)
	}
}

// clusterJS connects to servers, first to servers[first], reconnecting to
// the others when it goes down.
func clusterJS(t *testing.T, servers []*natstest.Server, first int) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(servers[first].URL()+","+natstest.ClusterURL(servers),
		nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// On a replicated bucket a worker may read a record from a replica that
// lags the leader. A requeue's dispatch read against the record before the
// requeue looks stale; the worker confirms with the leader before it drops
// a dispatch. Every requeued job runs, and a really stale dispatch is
// still dropped without a run.
func TestJobsRequeueOnACluster(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	js := clusterJS(t, servers, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := jobs.New(ctx, js, jobs.Config{Replicas: 3})
	require.NoError(t, err)

	var broken atomic.Bool
	broken.Store(true)
	var runs atomic.Int32
	startWorker(t, c, "rq", func(context.Context, *jobs.Job) error {
		runs.Add(1)
		if broken.Load() {
			return retry.Permanent(errors.New("broken"))
		}
		return nil
	}, jobs.WorkerConfig{Concurrency: 4, Lease: 5 * time.Second})

	const n = 40
	key := func(i int) string { return fmt.Sprintf("rq/%d", i) }
	for i := range n {
		_, _, err := c.Submit(ctx, "rq", key(i), nil, jobs.SubmitOptions{})
		require.NoError(t, err)
	}
	for i := range n {
		waitJob(t, c, key(i), 20*time.Second, isStatus(jobs.StatusFailed))
	}
	broken.Store(false)
	for i := range n {
		_, err := c.Requeue(ctx, key(i))
		require.NoError(t, err)
	}
	for i := range n {
		rec := waitJob(t, c, key(i), 20*time.Second, isStatus(jobs.StatusSuccess))
		require.Equal(t, 2, rec.AttemptCount)
	}
	require.EqualValues(t, 2*n, runs.Load())

	// A dispatch with a token the record never had is dropped: no run.
	stale, err := json.Marshal(map[string]string{"key": key(0), "token": "0193b1d2-0000-7000-8000-00000000dead"})
	require.NoError(t, err)
	_, err = js.Publish(ctx, jobs.RunSubject("rq"), stale)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		cons, err := js.Consumer(ctx, jobs.DefaultStream, jobs.ConsumerName("rq"))
		if err != nil {
			return false
		}
		ci, err := cons.Info(ctx)
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	}, 10*time.Second, 50*time.Millisecond)
	require.EqualValues(t, 2*n, runs.Load())
}
