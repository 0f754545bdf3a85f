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
	// JetretrySubmitOnly and JetretryDrainOnly time the two halves of the
	// end-to-end jetretry case apart: submitting with no worker, and a
	// worker running jobs submitted before the timer started.
	JetretrySubmitOnly = "jetretry-submit-only"
	JetretryDrainOnly  = "jetretry-drain-only"
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
		{GroupJobs, JetretrySubmitOnly, jobsSubmitOnly, nil},
		{GroupJobs, JetretryDrainOnly, jobsDrainOnly, nil},
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
		e, c, ctx, n := jobsSetup(b)
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
		w := startJobsWorker(ctx, b, c, queue, prefix)

		var ms0 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms0)
		b.ResetTimer()
		if err := submitJobs(ctx, c, queue, prefix, b.N); err != nil {
			b.Fatal(err)
		}
		w.wait(ctx, b)
		b.StopTimer()
		var ms1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms1)
		recordHeap(backlog > 0, int64(ms1.HeapInuse)-int64(ms0.HeapInuse))
		w.stop()
	}
}

// jobsSubmitOnly times the submitting half of jobsJetretry alone: b.N
// jobs submitted by 8 submitters, with no worker running.
func jobsSubmitOnly(b *testing.B) {
	_, c, ctx, n := jobsSetup(b)
	b.ResetTimer()
	if err := submitJobs(ctx, c, "s"+n, "sub-"+n+"-", b.N); err != nil {
		b.Fatal(err)
	}
}

// jobsDrainOnly times the running half of jobsJetretry alone: b.N jobs
// submitted before the timer starts, then run by a Worker of 8.
func jobsDrainOnly(b *testing.B) {
	_, c, ctx, n := jobsSetup(b)
	queue, prefix := "d"+n, "drain-"+n+"-"
	if err := submitJobs(ctx, c, queue, prefix, b.N); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	w := startJobsWorker(ctx, b, c, queue, prefix)
	w.wait(ctx, b)
	b.StopTimer()
	w.stop()
}

// jobsSetup is the common start of the jetretry jobs cases: the process's
// server and jobs client, a context bounding the run (cancelled when it
// ends), and a number naming the run's queue and keys.
func jobsSetup(b *testing.B) (*natsEnv, *jobs.Client, context.Context, string) {
	b.ReportAllocs()
	e := mustEnv(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	c, err := jobsClient(ctx, e)
	if err != nil {
		b.Fatal(err)
	}
	return e, c, ctx, strconv.FormatInt(seq.Add(1), 10)
}

// submitJobs submits n jobs prefix0..prefix(n-1) to queue from jobWorkers
// goroutines.
func submitJobs(ctx context.Context, c *jobs.Client, queue, prefix string, n int) error {
	var next atomic.Int64
	var sw sync.WaitGroup
	errs := make(chan error, jobWorkers)
	for range jobWorkers {
		sw.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, _, err := c.Submit(ctx, queue, prefix+strconv.FormatInt(i, 10), []byte(`{"report":"daily"}`), jobs.SubmitOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	sw.Wait()
	close(errs)
	return <-errs
}

// countingWorker is a running Worker of jobWorkers slots whose handler
// succeeds, counting the successes of the jobs whose keys have a prefix.
type countingWorker struct {
	done, target atomic.Int64
	all          chan struct{}
	cancel       context.CancelFunc
	err          chan error
}

func startJobsWorker(ctx context.Context, b *testing.B, c *jobs.Client, queue, prefix string) *countingWorker {
	cw := &countingWorker{all: make(chan struct{}), err: make(chan error, 1)}
	cw.target.Store(int64(b.N))
	// A job counts when its success is written: the worker reports each
	// outcome after its record is written.
	w, err := jobs.NewWorker(c, queue, func(context.Context, *jobs.Job) error {
		return nil
	}, jobs.WorkerConfig{Concurrency: jobWorkers, OnOutcome: func(r jobs.Record) {
		if r.Status == jobs.StatusSuccess && strings.HasPrefix(r.Key, prefix) && cw.done.Add(1) == cw.target.Load() {
			close(cw.all)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	cw.cancel = wcancel
	go func() { cw.err <- w.Run(wctx) }()
	return cw
}

// wait waits until all b.N jobs succeeded.
func (cw *countingWorker) wait(ctx context.Context, b *testing.B) {
	select {
	case <-cw.all:
	case <-ctx.Done():
		b.Fatalf("jetretry: %d of %d jobs done", cw.done.Load(), cw.target.Load())
	}
}

func (cw *countingWorker) stop() {
	cw.cancel()
	<-cw.err
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
