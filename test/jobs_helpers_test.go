package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

// jobsEnv is an embedded server with a jobs client and an audit memory.
type jobsEnv struct {
	s     *natstest.Server
	js    jetstream.JetStream
	c     *jobs.Client
	audit *audit.Memory
}

func newJobsEnv(t *testing.T) *jobsEnv {
	t.Helper()
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	mem := &audit.Memory{}
	c, err := jobs.New(context.Background(), js, jobs.Config{Audit: mem})
	require.NoError(t, err)
	return &jobsEnv{s: s, js: js, c: c, audit: mem}
}

// startWorker runs a worker until the test ends.
func startWorker(t *testing.T, c *jobs.Client, queue string, h jobs.Handler, cfg jobs.WorkerConfig) {
	t.Helper()
	w, err := jobs.NewWorker(c, queue, h, cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// jobsPolicy is a policy with a 1 s base and no jitter.
func jobsPolicy(attempts int) *retry.Policy {
	return &retry.Policy{MaxAttempts: attempts, BaseDelay: time.Second, MaxDelay: 4 * time.Second, Multiplier: 2, Jitter: retry.JitterNone}
}

// waitJob polls key until cond holds or timeout passes.
func waitJob(t *testing.T, c *jobs.Client, key string, timeout time.Duration, cond func(jobs.Record) bool) jobs.Record {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var rec jobs.Record
	var err error
	for time.Now().Before(deadline) {
		rec, err = c.Get(context.Background(), key)
		if err == nil && cond(rec) {
			return rec
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("job %s: condition not met within %v: last %+v (err %v)", key, timeout, rec, err)
	return rec
}

func isStatus(s jobs.Status) func(jobs.Record) bool {
	return func(r jobs.Record) bool { return r.Status == s }
}

func jobEvents(m *audit.Memory, typ audit.Type, key string) []audit.Event {
	return m.Filter(func(e audit.Event) bool { return e.Type == typ && e.CorrelationID == key })
}
