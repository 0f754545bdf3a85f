package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/jobs"
)

// Groups of the durable-jobs benchmarks.
const (
	GroupJobs        = "Jobs/8workers"
	GroupJobsBacklog = "JobsBacklog/8workers"
	// JetretryBacklog is jetretry with backlogJobs delayed retries held by
	// the server while fresh jobs flow.
	JetretryBacklog = "jetretry-backlog100k"
)

const (
	jobWorkers  = 8
	backlogJobs = 100_000
)

func init() {
	Goals[GroupJobs] = 0.5
	VariantGoals[GroupJobsBacklog+"/"+JetretryBacklog] = 0.9
}

func jobsCases() []Case {
	return []Case{
		{GroupJobs, Raw, jobsRaw, nil},
		{GroupJobs, Jetretry, jobsJetretry(0), nil},
		{GroupJobsBacklog, Jetretry, jobsJetretry(0), nil},
		{GroupJobsBacklog, JetretryBacklog, jobsJetretry(backlogJobs), nil},
	}
}

// jobsRaw is the baseline: b.N messages published to a work-queue stream,
// consumed and acked by 8 workers.
func jobsRaw(b *testing.B) {
	b.ReportAllocs()
	e := mustEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := strconv.FormatInt(seq.Add(1), 10)
	st, err := e.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH_WQ_" + n, Subjects: []string{"benchwq" + n + ".>"}, Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "w", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 10000,
	})
	if err != nil {
		b.Fatal(err)
	}
	subject := "benchwq" + n + ".run"
	body := []byte(`{"key":"k","dispatch":"0193b1d2-0000-7000-8000-000000000000"}`)
	var done atomic.Int64
	all := make(chan struct{})
	b.ResetTimer()
	// The same pull expiry and heartbeat as jobs.Worker: a lost pull
	// request is noticed within seconds.
	it, err := cons.Messages(jetstream.PullMaxMessages(jobWorkers*16), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	msgs := make(chan jetstream.Msg, jobWorkers)
	var wg sync.WaitGroup
	for range jobWorkers {
		wg.Go(func() {
			for m := range msgs {
				if err := m.Ack(); err != nil {
					b.Error(err)
				}
				if done.Add(1) == int64(b.N) {
					close(all)
				}
			}
		})
	}
	go func() {
		for {
			m, err := it.Next()
			if err != nil {
				close(msgs)
				return
			}
			msgs <- m
		}
	}()
	for i := 0; i < b.N; i++ {
		if _, err := e.js.PublishAsync(subject, body); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		b.Fatalf("raw: %d of %d consumed", done.Load(), b.N)
	}
	b.StopTimer()
	it.Stop()
	wg.Wait()
}

// jobsJetretry submits b.N jobs (from 8 submitters) and runs them with a
// Worker of 8, end to end: every job is acked after its success is
// written. With backlog > 0, that many other jobs first wait in backoff,
// held by the server as message schedules an hour out.
func jobsJetretry(backlog int) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		e := mustEnv(b)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		n := strconv.FormatInt(seq.Add(1), 10)
		c, err := jobsClient(ctx, e)
		if err != nil {
			b.Fatal(err)
		}
		queue := "q" + n
		if backlog > 0 {
			// One backlog per process, filled once: the fresh jobs of every
			// run flow through the same queue past it.
			queue = "backlog"
			backlogOnce.Do(func() { backlogErr = fillBacklog(ctx, e, queue, backlog) })
			if backlogErr != nil {
				b.Fatal(backlogErr)
			}
		}
		prefix := "job-" + n + "-"
		var done atomic.Int64
		var target atomic.Int64
		target.Store(int64(b.N))
		all := make(chan struct{})
		// A job counts when its success is written: the worker reports each
		// outcome after its record is written.
		w, err := jobs.NewWorker(c, queue, func(context.Context, *jobs.Job) error {
			return nil
		}, jobs.WorkerConfig{Concurrency: jobWorkers, OnOutcome: func(r jobs.Record) {
			if r.Status == jobs.StatusSuccess && strings.HasPrefix(r.Key, prefix) && done.Add(1) == target.Load() {
				close(all)
			}
		}})
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		werr := make(chan error, 1)
		go func() { werr <- w.Run(wctx) }()

		var ms0 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		b.ResetTimer()
		var next atomic.Int64
		var sw sync.WaitGroup
		for range jobWorkers {
			sw.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= int64(b.N) {
						return
					}
					if _, _, err := c.Submit(ctx, queue, "job-"+n+"-"+strconv.FormatInt(i, 10), []byte(`{"report":"daily"}`), jobs.SubmitOptions{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		sw.Wait()
		select {
		case <-all:
		case <-ctx.Done():
			b.Fatalf("jetretry: %d of %d jobs done", done.Load(), b.N)
		}
		b.StopTimer()
		var ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		recordHeap(backlog > 0, int64(ms1.HeapInuse)-int64(ms0.HeapInuse))
		wcancel()
		<-werr
	}
}

// fillBacklog makes count retries of queue wait in backoff, held by the
// server as one-shot message schedules an hour out on each job's schedule
// subject, exactly the message a worker publishes after a retryable
// failure. It writes them with raw async publishes, since running 100,000
// failures through a worker would take minutes; the jobs' KV records are
// not written (workers read a record only when its dispatch arrives).
func fillBacklog(ctx context.Context, e *natsEnv, queue string, count int) error {
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for i := 0; i < count; i++ {
		key := fmt.Sprintf("backlog-%s-%d", queue, i)
		msg := nats.NewMsg(jobs.ScheduleSubject(queue, key))
		msg.Data = []byte(`{"key":"` + key + `","dispatch":"backlog"}`)
		if _, err := e.js.PublishMsgAsync(msg, jetstream.WithScheduleAt(at), jetstream.WithScheduleTarget(jobs.RunSubject(queue))); err != nil {
			return err
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

var (
	backlogOnce sync.Once
	backlogErr  error

	jobsOnce sync.Once
	jobsC    *jobs.Client
	jobsErr  error
)

// jobsClient returns the jobs client of the process: the jobs stream's
// subjects are fixed, so there is one set of jobs streams per server, and
// each benchmark run uses a queue of its own.
func jobsClient(ctx context.Context, e *natsEnv) (*jobs.Client, error) {
	jobsOnce.Do(func() { jobsC, jobsErr = jobs.New(ctx, e.js, jobs.Config{}) })
	return jobsC, jobsErr
}

// heapGrowth is the largest growth of the Go heap in use over one run,
// after GC, without [0] and with [1] the backlog.
var heapGrowth [2]atomic.Int64

// rssPeak is the largest resident set size of the process seen at the end
// of a run, without [0] and with [1] the backlog.
var rssPeak [2]atomic.Int64

func recordHeap(withBacklog bool, d int64) {
	i := 0
	if withBacklog {
		i = 1
	}
	if d > heapGrowth[i].Load() {
		heapGrowth[i].Store(d)
	}
	if rss := readRSS(); rss > rssPeak[i].Load() {
		rssPeak[i].Store(rss)
	}
}

// readRSS returns the process's resident set size (VmRSS), or 0 where
// /proc is missing.
func readRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// JobsRSS returns the largest resident set size of the benchmark process
// (workers and embedded server together) at the end of a jobs run, without
// and with the backlog run before it.
func JobsRSS() (without, with int64) {
	return rssPeak[0].Load(), rssPeak[1].Load()
}

// JobsHeapGrowth returns the largest growth of the Go heap in use over one
// jobs run (after GC), without and with the backlog: the worker process's
// memory does not depend on the backlog when the two are alike.
func JobsHeapGrowth() (without, with int64) {
	return heapGrowth[0].Load(), heapGrowth[1].Load()
}
