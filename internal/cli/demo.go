package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

const demoUsage = `Usage: jetretry demo [flags]

Runs a flaky workload through all 17 retry categories and a durable job
queue on NATS JetStream, then prints per-category statistics read back
from the audit stream, and the jobs' outcomes.

Where it runs (the first that applies):
  --server URL   an existing NATS server with JetStream (auth and TLS flags
                 below);
  $NATS_URL      the same, when --server is empty;
  otherwise      an embedded JetStream server on 127.0.0.1 (random port)
                 with its store in a temp dir removed at exit, or in
                 --data DIR, which is kept: runs on the same DIR append to
                 the same audit stream.

For --duration it starts --rate operations a second, planned from --seed:
the same seed gives the same plan. Simulated services call through natsx
(connect, publish, subscribe, request, stream creation), kvx (bucket and
key operations) and retry.Do (execution, approval, replay and validation
calls to demo responders), with injected faults: transient failures,
permanent failures, rate-limit hints, exhaustion, and duplicates submitted
twice under one idempotency key (the second is a cache hit from the
idempotency KV bucket). Every category keeps its seed 002 attempt count,
but delays are 100x shorter (1s becomes 10ms) so a run takes seconds.

Alongside, durable jobs (package jobs) go to the queue demo-reports: one
per 10 operations (6 to 200, planned from --seed), spread over --duration,
keys demo-<run>/report/NNN. Two workers of 4 goroutines run them with a 2s
lease and a short policy: 4 attempts, backoff 1s, 2s, 4s. The jobs
succeed, fail transiently and then succeed, are rate-limited (retried after
a 1s hint, budget kept), fail finally (retry.Permanent: a dead letter at
once) or exhaust their attempts (a dead letter). One simulated worker
crash: before the others start, a third worker claims the first job, and
its connection to NATS is closed abruptly in the handler, as when its
process is killed; its lease is neither renewed nor handed back, and after
it another worker records the run as crashed and runs the job again.
Retries are scheduled by the server at whole seconds, so the demo runs
longer than --duration: after the workload it waits up to 15s for every
job to succeed or fail (Ctrl-C stops waiting; unfinished jobs are counted).

Every retry decision goes to the audit stream JETRETRY_AUDIT. At the end
the demo flushes the audit publisher and reads this run's events back
(tenant_id demo-<run>): the table shows what the stream holds, not
in-memory counters. Then the jobs: their records, their dead letters, and
their audit events (category REPLAY_REPLAY_PROCESSING, without a tenant_id:
told apart by correlation_id, the job key). Ctrl-C stops early and still
prints the summary.

Progress is one updating line on a terminal, else a line a second (on
stderr with --json). The demo creates the stream JETRETRY_DEMO_ORDERS, the
buckets JETRETRY_DEMO and JETRETRY_IDEMPOTENCY, the jobs' bucket
JETRETRY_JOBS and streams JETRETRY_JOBS_WORK and JETRETRY_JOBS_DLQ (message
schedules need server 2.12+), and the audit stream if it is missing
(existing ones are used as they are). Against --server the jobs stay:
inspect them with "jetretry jobs list" and "jetretry jobs dead".

Examples:
  jetretry demo
  jetretry demo --duration 10s --rate 500 --seed 7
  jetretry demo --data ./demo-data         # keep the store; rerun to append
  jetretry demo --server nats://localhost:4222 --json
  NATS_URL= jetretry demo                  # ignore $NATS_URL: embedded server
`

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	d := &Demo{}
	fs := newFlags("demo", demoUsage, stdout)
	fs.DurationVar(&d.Duration, "duration", 5*time.Second, "how long to start operations")
	fs.IntVar(&d.Rate, "rate", 200, "operations started per second")
	fs.Uint64Var(&d.Seed, "seed", 1, "random seed: the same seed gives the same plan")
	fs.IntVar(&d.Workers, "workers", 64, "most operations in flight at once")
	fs.StringVar(&d.DataDir, "data", "", "keep the embedded server's store and the audit spool in `dir` (default: a temp dir, removed at exit)")
	fs.BoolVar(&d.JSON, "json", false, "print the statistics as JSON (progress goes to stderr)")
	d.conn.register(fs)
	if f := fs.Lookup("server"); f != nil {
		f.Usage = "NATS server URL(s), comma-separated (default $NATS_URL, then an embedded server)"
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	d.Progress = stdout
	if d.JSON {
		d.Progress = stderr
	}
	return d.Run(ctx, stdout)
}

// demoMaxOps bounds the operations of a run, whose plan is held in memory.
const demoMaxOps = 1_000_000

// demoTimeScale divides the delays of the seed 002 matrix in the demo.
const demoTimeScale = 100

// Demo is the demo command: a flaky workload through every category,
// audited to JetStream and summarized from the audit stream. Run it once.
type Demo struct {
	// Duration is how long operations are started. Required.
	Duration time.Duration
	// Rate is how many operations start per second. Required.
	Rate int
	// Seed draws the plan; the same seed gives the same plan.
	Seed uint64
	// Workers bounds the operations in flight. Required.
	Workers int
	// DataDir keeps the embedded server's store and the audit spool. Empty
	// means a temp dir removed at exit.
	DataDir string
	// JSON prints the statistics as JSON instead of a table.
	JSON bool
	// Progress receives the status and progress lines; nil discards them.
	Progress io.Writer

	conn   connFlags
	getenv func(string) string // nil: os.Getenv
}

// demoResult is the outcome of a run, as --json prints it.
type demoResult struct {
	RunID           string    `json:"run_id"`
	TenantID        string    `json:"tenant_id"`
	Seed            uint64    `json:"seed"`
	Rate            int       `json:"rate"`
	DurationSeconds float64   `json:"duration_seconds"`
	Server          string    `json:"server"`
	Embedded        bool      `json:"embedded"`
	Since           time.Time `json:"since"`
	Planned         int       `json:"planned_operations"`
	// Operations counts the operations that ran, Failed those that
	// failed, and ExpectedFailures those of them planned to fail
	// (permanent, exhaust).
	Operations       int64  `json:"operations"`
	Failed           int64  `json:"failed_operations"`
	ExpectedFailures int64  `json:"expected_failures"`
	Interrupted      bool   `json:"interrupted"`
	Stream           string `json:"stream"`
	// Events counts this run's events read back from the stream, and
	// StreamEvents all the events the stream holds.
	Events       int        `json:"events"`
	StreamEvents uint64     `json:"stream_events"`
	Categories   []statsRow `json:"categories"`
	// Jobs summarizes the durable job queue.
	Jobs *demoJobsResult `json:"jobs"`
}

func (d *Demo) validate() error {
	switch {
	case d.Duration <= 0:
		return usagef("--duration must be positive")
	case d.Rate <= 0:
		return usagef("--rate must be positive")
	case d.Workers <= 0:
		return usagef("--workers must be positive")
	case d.Duration.Seconds()*float64(d.Rate) > demoMaxOps:
		return usagef("--duration times --rate must be at most %d operations", demoMaxOps)
	}
	if d.conn.timeout == 0 {
		d.conn.timeout = 5 * time.Second
	}
	return nil
}

// Run runs the demo and writes the statistics (a table, or JSON) to
// stdout. A usage error comes back as such; ctx ending stops starting
// operations, but the statistics of what ran are still printed.
func (d *Demo) Run(ctx context.Context, stdout io.Writer) (err error) {
	if err := d.validate(); err != nil {
		return err
	}
	getenv := d.getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	progress := d.Progress
	if progress == nil {
		progress = io.Discard
	}
	total := max(int(d.Duration.Seconds()*float64(d.Rate)), len(categories.All()))
	plan := planWorkload(total, d.Seed)
	run := newDemoRunID()
	res := &demoResult{
		RunID: run, TenantID: "demo-" + run, Seed: d.Seed, Rate: d.Rate, DurationSeconds: d.Duration.Seconds(),
		Planned: total, Stream: audit.DefaultStreamName,
	}

	// The server: --server, $NATS_URL, or embedded.
	cf := d.conn
	if strings.TrimSpace(cf.server) == "" {
		cf.server = strings.TrimSpace(getenv(natsx.EnvURL))
	}
	res.Embedded = cf.server == ""
	dir := d.DataDir
	spoolLeft := false // events left in the spool by Close
	if dir == "" {
		if dir, err = os.MkdirTemp("", "jetretry-demo-"); err != nil {
			return err
		}
		defer func() {
			// A spool that still holds events for a server that
			// outlives the demo is kept; the next run with --data on
			// it delivers them.
			if spoolLeft && !res.Embedded {
				fmt.Fprintf(progress, "audit events left in the spool: kept %s (rerun with --data %[1]s to deliver them)\n", dir)
				return
			}
			os.RemoveAll(dir)
		}()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if res.Embedded {
		store := filepath.Join(dir, "nats")
		ns, err := startDemoServer(store)
		if err != nil {
			return err
		}
		defer func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		}()
		cf.server = ns.ClientURL()
		where := "a temp dir removed at exit"
		if d.DataDir != "" {
			where = store + " (kept)"
		}
		fmt.Fprintf(progress, "jetretry demo: embedded JetStream server at %s, store in %s\n", cf.server, where)
	}
	res.Server = displayURL(cf.server)

	nc, js, err := cf.connect(ctx, "jetretry-demo", nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	if !res.Embedded {
		fmt.Fprintf(progress, "jetretry demo: NATS server at %s\n", res.Server)
	}
	if err := ensureDemoAuditStream(ctx, js); err != nil {
		return err
	}
	spool := filepath.Join(dir, "spool")
	pub, err := audit.NewPublisher(js, audit.PublisherConfig{SpoolDir: spool})
	if errors.Is(err, audit.ErrSpoolInUse) {
		return fmt.Errorf("the audit spool %s is in use by another demo: use another --data", spool)
	} else if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := pub.Close(cctx); cerr != nil {
			spoolLeft = true
			if err == nil {
				err = cerr
			}
		}
	}()
	store, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{})
	if err != nil {
		return err
	}
	mgr, err := retry.NewManager(retry.WithPolicies(demoPolicies()), retry.WithEmitter(pub), retry.WithStore(store))
	if err != nil {
		return err
	}

	start := time.Now().UTC()
	res.Since = start
	svcs, err := newDemoServices(ctx, run, res.TenantID, mgr, nc, js, cf.config("jetretry-demo"), len(strings.Split(cf.server, ",")))
	if err != nil {
		return fmt.Errorf("demo setup: %w", err)
	}
	defer svcs.close()

	jobPlan := planJobs(demoJobCount(total), d.Seed)
	jd, err := startDemoJobs(ctx, run, jobPlan, js, cf, pub, progress)
	if err != nil {
		return fmt.Errorf("demo jobs setup: %w", err)
	}
	defer jd.stop()

	counts := [numKinds]int{}
	for _, op := range plan {
		counts[op.Kind]++
	}
	fmt.Fprintf(progress, "run %s (tenant_id %s): %d operations over %v at %d/s across %d categories, seed %d; delays %dx shorter than seed 002\n",
		run, res.TenantID, total, d.Duration, d.Rate, len(categories.All()), d.Seed, demoTimeScale)
	var planLine []string
	for k := range numKinds {
		planLine = append(planLine, fmt.Sprintf("%d %s", counts[k], k))
	}
	fmt.Fprintf(progress, "plan: %s\n", strings.Join(planLine, ", "))
	jobCounts := [numJobKinds]int{}
	for _, j := range jobPlan {
		jobCounts[j.Kind]++
	}
	planLine = planLine[:0]
	for k := range numJobKinds {
		planLine = append(planLine, fmt.Sprintf("%d %s", jobCounts[k], k))
	}
	pol := demoJobPolicy()
	fmt.Fprintf(progress, "jobs: %d on queue %s (%s), %d workers x %d, lease %v, %d attempts, backoff %v to %v\n",
		len(jobPlan), demoJobsQueue, strings.Join(planLine, ", "), demoJobWorkers, demoJobConcurrency, demoJobLease,
		pol.MaxAttempts, pol.BaseDelay, pol.MaxDelay)
	if jd.crashed {
		fmt.Fprintf(progress, "jobs: a worker claimed %s and its connection was cut (a simulated crash)\n", jd.key(0))
	} else {
		fmt.Fprintf(progress, "jobs: the crashing worker did not claim %s in time: no crash simulated\n", jd.key(0))
	}

	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		jd.submitAll(ctx, d.Duration)
	}()
	dr := d.drive(ctx, svcs, plan, pub, progress)
	<-submitted
	res.Operations, res.Failed, res.ExpectedFailures, res.Interrupted = dr.done, dr.failed, dr.expected, dr.interrupted
	if dr.interrupted {
		fmt.Fprintf(progress, "interrupted: %d of %d operations ran\n", dr.done, total)
	}
	if dr.surprise != nil {
		fmt.Fprintf(progress, "%d operations failed that were planned to succeed; the first: %v\n", dr.surprises, dr.surprise)
	}

	if err := jd.submitErr; err != nil {
		fmt.Fprintf(progress, "jobs: %d of %d submitted; the first failure: %v\n", jd.submitted, len(jobPlan), err)
	}

	// The jobs' retries run on after the workload; then the workers stop.
	waited := jd.wait(ctx, demoJobsGrace, progress)
	jd.stop()

	// Read the run back from the stream, after every event is stored.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := pub.Flush(rctx); err != nil {
		return fmt.Errorf("audit events not all published: %w", err)
	}
	stats, err := audit.Stats(rctx, js, audit.StreamConfig{}, audit.Filter{TenantID: res.TenantID, Since: start.Add(-time.Second)})
	if errors.Is(err, audit.ErrUndecodable) {
		// Messages from another publisher: this run's events are all
		// counted.
		fmt.Fprintf(progress, "warning: %v\n", err)
	} else if err != nil {
		return fmt.Errorf("read back the audit stream: %w", err)
	}
	if st, err := js.Stream(rctx, audit.DefaultStreamName); err == nil {
		if info, err := st.Info(rctx); err == nil {
			res.StreamEvents = info.State.Msgs
		}
	}
	for _, c := range categories.All() {
		s := stats[string(c)]
		res.Events += s.Attempts + s.Exhaustions + s.IdempotencyHits + s.IdempotencyRecords + s.Takeovers
		res.Categories = append(res.Categories, newStatsRow(string(c), s))
	}
	if res.Jobs, err = jd.summarize(rctx, js, start.Add(-time.Second), waited); err != nil {
		return err
	}
	if d.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	if err := printDemoTable(stdout, res); err != nil {
		return err
	}
	return printDemoJobs(stdout, res.Jobs)
}

// demoPolicies returns seed 002's matrix with delays demoTimeScale times
// shorter and the attempt counts kept.
func demoPolicies() map[retry.Category]retry.Policy {
	ps := categories.Defaults()
	for c, p := range ps {
		p.BaseDelay /= demoTimeScale
		p.MaxDelay /= demoTimeScale
		ps[c] = p
	}
	return ps
}

// newDemoRunID returns 8 random hex digits naming a run.
func newDemoRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// startDemoServer starts a JetStream server on 127.0.0.1, on a random port,
// with its store in storeDir.
func startDemoServer(storeDir string) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "jetretry-demo",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      true,
		NoSigs:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded server: not ready after 10s (is the store %s in use?)", storeDir)
	}
	return ns, nil
}

// ensureDemoAuditStream creates the audit stream with the defaults when it is
// missing. An existing stream is left as it is: its replicas and retention
// are the operator's.
func ensureDemoAuditStream(ctx context.Context, js jetstream.JetStream) error {
	_, err := js.Stream(ctx, audit.DefaultStreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = audit.EnsureStream(ctx, js, audit.StreamConfig{})
	}
	if err != nil {
		return fmt.Errorf("audit stream %s: %w", audit.DefaultStreamName, err)
	}
	return nil
}

// demoDriveResult is what drive saw.
type demoDriveResult struct {
	done, failed, surprises int64
	expected                int64 // operations that ran planned to fail
	surprise                error // the first failure of an operation planned to succeed
	interrupted             bool
}

// drainGrace is how long operations in flight may finish after ctx ended.
const drainGrace = 5 * time.Second

// drive starts the operations of plan at the demo's rate, at most
// d.Workers at once, and reports progress. When ctx ends it starts no more
// and lets those in flight finish (for at most drainGrace), so their
// audit events are complete.
func (d *Demo) drive(ctx context.Context, svcs *demoServices, plan []demoOp, pub *audit.Publisher, progress io.Writer) demoDriveResult {
	opsCtx, cancelOps := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelOps()
	var (
		done, failed, surprises atomic.Int64
		expected                atomic.Int64
		mu                      sync.Mutex
		surprise                error
		wg                      sync.WaitGroup
	)
	sem := make(chan struct{}, d.Workers)
	start := time.Now()

	live := isTerminal(progress)
	report := func(final bool) {
		line := fmt.Sprintf("%5.1fs  operations %d/%d  failed %d  audit events %d",
			time.Since(start).Seconds(), done.Load(), len(plan), failed.Load(), pub.Stats().Accepted)
		switch {
		case live && final:
			fmt.Fprintf(progress, "\r%s\x1b[K\n", line) // ESC [K clears the rest of the line
		case live:
			fmt.Fprintf(progress, "\r%s\x1b[K", line)
		default:
			fmt.Fprintln(progress, line)
		}
	}
	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		every := time.Second
		if live {
			every = 200 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				report(false)
			case <-stopProgress:
				return
			}
		}
	}()

	interval := time.Second / time.Duration(d.Rate)
	timer := time.NewTimer(0)
	<-timer.C
	interrupted := false
feed:
	for i, op := range plan {
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				interrupted = true
				break feed
			}
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			interrupted = true
			break feed
		}
		if ctx.Err() != nil {
			<-sem
			interrupted = true
			break
		}
		wg.Add(1)
		go func(op demoOp) {
			defer func() {
				<-sem
				wg.Done()
			}()
			planned := op.Kind == kindPermanent || op.Kind == kindExhaust
			if planned {
				expected.Add(1)
			}
			err := svcs.do(opsCtx, op)
			if err != nil {
				failed.Add(1)
				if !planned {
					surprises.Add(1)
					mu.Lock()
					if surprise == nil {
						surprise = fmt.Errorf("operation %d (%s, %s): %w", op.Seq, op.Category, op.Kind, err)
					}
					mu.Unlock()
				}
			}
			done.Add(1)
		}(op)
	}
	timer.Stop()

	allDone := make(chan struct{})
	go func() {
		wg.Wait()
		close(allDone)
	}()
	if interrupted {
		select {
		case <-allDone:
		case <-time.After(drainGrace):
			cancelOps()
			<-allDone
		}
	} else {
		<-allDone
	}
	close(stopProgress)
	<-progressDone
	report(true)
	mu.Lock()
	defer mu.Unlock()
	return demoDriveResult{done: done.Load(), failed: failed.Load(), surprises: surprises.Load(), expected: expected.Load(),
		surprise: surprise, interrupted: interrupted}
}

// printDemoTable writes the statistics as a table.
func printDemoTable(w io.Writer, res *demoResult) error {
	fmt.Fprintf(w, "\nRead back from the audit stream %s: %d events of run %s (tenant_id %s); the stream holds %d.\n\n",
		res.Stream, res.Events, res.RunID, res.TenantID, res.StreamEvents)
	const row = "%-27s  %8s  %9s  %5s  %7s  %7s  %8s  %8s\n"
	fmt.Fprintf(w, row, "CATEGORY", "ATTEMPTS", "EXHAUSTED", "CALLS", "SUCCESS", "AVG_ATT", "IDEM_HIT", "IDEM_REC")
	var tot statsRow
	var attemptsMade float64 // sum of AvgAttempts * CallsWithFailures
	for _, s := range res.Categories {
		fmt.Fprintf(w, row, s.Category, demoCount(s.Attempts), demoCount(s.Exhaustions), demoCount(s.CallsWithFailures),
			demoRate(s.SuccessRate, s.CallsWithFailures), demoAvg(s.AvgAttempts, s.CallsWithFailures),
			demoCount(s.IdempotencyHits), demoCount(s.IdempotencyRecords))
		tot.Attempts += s.Attempts
		tot.Exhaustions += s.Exhaustions
		tot.CallsWithFailures += s.CallsWithFailures
		tot.FailedCalls += s.FailedCalls
		tot.IdempotencyHits += s.IdempotencyHits
		tot.IdempotencyRecords += s.IdempotencyRecords
		attemptsMade += s.AvgAttempts * float64(s.CallsWithFailures)
	}
	if n := tot.CallsWithFailures; n > 0 {
		tot.SuccessRate = max(0, float64(n-tot.FailedCalls)/float64(n))
		tot.AvgAttempts = attemptsMade / float64(n)
	}
	fmt.Fprintf(w, row, "TOTAL", demoCount(tot.Attempts), demoCount(tot.Exhaustions), demoCount(tot.CallsWithFailures),
		demoRate(tot.SuccessRate, tot.CallsWithFailures), demoAvg(tot.AvgAttempts, tot.CallsWithFailures),
		demoCount(tot.IdempotencyHits), demoCount(tot.IdempotencyRecords))
	_, err := fmt.Fprintf(w, `
ATTEMPTS   retry_attempt events: failed attempts that were retried
EXHAUSTED  retry_exhausted events: calls that failed (exhausted, permanent, ...)
CALLS      calls that failed at least once; SUCCESS and AVG_ATT describe them
           (a call that succeeds at its first attempt leaves no event)
IDEM_HIT   idempotency hits: duplicates served from the idempotency bucket
IDEM_REC   idempotency records: results stored under a key

%d operations ran, %d failed (%d planned to fail).
`, res.Operations, res.Failed, res.ExpectedFailures)
	return err
}

func demoCount(n int) string { return fmt.Sprint(n) }

func demoRate(r float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*r)
}

func demoAvg(a float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", a)
}

// isTerminal reports whether w is a terminal, for live progress.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
