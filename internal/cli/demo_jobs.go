package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

// The demo's durable job queue (package jobs). Jobs are planned from the
// seed like the operations, submitted over the run, and served by
// demoJobWorkers workers. Their handler fails as the job's plan says,
// counting by the job's attempt_count. One more worker, on a connection of
// its own, claims the first job (planned "crash"), and that connection is
// closed abruptly while its handler runs: the worker can neither renew the
// lease nor hand the job back, as when its process is killed. After the
// lease, another worker records the run as crashed and runs the job again.

const (
	demoJobsQueue = "demo-reports"
	// demoJobLease is the workers' lease: a crashed run is taken over
	// about this long after its worker died.
	demoJobLease = 2 * time.Second
	// demoJobRetryAfter is the hint of rate-limited failures.
	demoJobRetryAfter = time.Second
	// demoJobWorkers and demoJobConcurrency: the workers (as if in
	// separate processes) and the jobs each runs at once.
	demoJobWorkers     = 2
	demoJobConcurrency = 4
	// demoJobsPerOps: about one job is planned per demoJobsPerOps
	// operations, at least one of each kind and at most demoMaxJobs.
	demoJobsPerOps = 10
	demoMaxJobs    = 200
	// demoJobsGrace bounds the wait for the jobs to finish after the
	// workload: the slowest planned job (exhaust, submitted last) waits
	// about 1+2+4 s, each rounded up to a whole second.
	demoJobsGrace = 15 * time.Second
	// demoCrashClaimWait bounds the wait for the crashing worker to claim
	// its job.
	demoCrashClaimWait = 10 * time.Second
	// demoDLQLimit bounds the dead letters read back.
	demoDLQLimit = 100_000
)

// demoJobPolicy is the queue's retry policy: seed 004's job policy, with
// delays in seconds instead of minutes and 4 attempts.
func demoJobPolicy() retry.Policy {
	return retry.Policy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 4 * time.Second, Multiplier: 2, Jitter: retry.JitterNone}
}

// jobKind is the planned outcome of one demo job.
type jobKind uint8

const (
	// jobOK succeeds at its first run.
	jobOK jobKind = iota
	// jobTransient fails demoJob.Failures times (retryable), then
	// succeeds.
	jobTransient
	// jobRateLimited fails demoJob.Failures times with a retry-after hint
	// (retry.RateLimited: the budget is kept), then succeeds.
	jobRateLimited
	// jobFinal fails with retry.Permanent: failed, terminal, dead letter.
	jobFinal
	// jobExhaust fails (retryable) at every run: dead letter after the
	// policy's attempts.
	jobExhaust
	// jobCrash is claimed by the crashing worker, then run again by
	// another worker, where it succeeds.
	jobCrash

	numJobKinds
)

var jobKindNames = [numJobKinds]string{"ok", "transient", "rate_limited", "final", "exhaust", "crash"}

func (k jobKind) String() string {
	if k < numJobKinds {
		return jobKindNames[k]
	}
	return "unknown"
}

func parseJobKind(s string) (jobKind, bool) {
	for k, n := range jobKindNames {
		if n == s {
			return jobKind(k), true
		}
	}
	return 0, false
}

// jobKindWeights are the relative frequencies of the kinds after the
// first of each; there is one crash per run.
var jobKindWeights = [numJobKinds]int{jobOK: 50, jobTransient: 25, jobRateLimited: 10, jobFinal: 7, jobExhaust: 8}

// demoJob is one planned job.
type demoJob struct {
	Seq  int
	Kind jobKind
	// Failures is how many runs of a transient (1 to MaxAttempts-1) or
	// rate-limited (1 or 2) job fail before it succeeds.
	Failures int
}

// demoJobCount is the number of jobs of a run of ops operations.
func demoJobCount(ops int) int {
	return min(max(ops/demoJobsPerOps, int(numJobKinds)), demoMaxJobs)
}

// planJobs returns n (at least numJobKinds) jobs drawn from seed; the same
// n and seed give the same plan. Job 0 is the crash; jobs 1 to 5 are one
// of each other kind, shuffled; the others are drawn by jobKindWeights.
func planJobs(n int, seed uint64) []demoJob {
	r := rand.New(rand.NewPCG(seed^0x6a09e667f3bcc908, seed))
	maxAttempts := demoJobPolicy().MaxAttempts
	first := []jobKind{jobOK, jobTransient, jobRateLimited, jobFinal, jobExhaust}
	r.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	kinds := append([]jobKind{jobCrash}, first...)
	total := 0
	for _, w := range jobKindWeights {
		total += w
	}
	out := make([]demoJob, 0, n)
	for i := range n {
		var k jobKind
		if i < len(kinds) {
			k = kinds[i]
		} else {
			x := r.IntN(total)
			for k = jobOK; k < numJobKinds; k++ {
				if x < jobKindWeights[k] {
					break
				}
				x -= jobKindWeights[k]
			}
		}
		j := demoJob{Seq: i, Kind: k}
		switch k {
		case jobTransient:
			j.Failures = 1 + r.IntN(maxAttempts-1)
		case jobRateLimited:
			j.Failures = 1 + r.IntN(2)
		}
		out = append(out, j)
	}
	return out
}

// demoJobPayload is a demo job's payload: its plan, which any worker
// (also of another run) follows.
type demoJobPayload struct {
	Run      string `json:"run"`
	Seq      int    `json:"seq"`
	Plan     string `json:"plan"`
	Failures int    `json:"failures,omitempty"`
}

// handleDemoJob is the workers' handler: it fails as the job's plan says,
// counting by its attempt_count.
func handleDemoJob(_ context.Context, j *jobs.Job) error {
	var p demoJobPayload
	if err := json.Unmarshal(j.Payload, &p); err != nil {
		return retry.Permanent(fmt.Errorf("demo: job %s: bad payload: %w", j.Key, err))
	}
	k, ok := parseJobKind(p.Plan)
	if !ok {
		return retry.Permanent(fmt.Errorf("demo: job %s: unknown plan %q", j.Key, p.Plan))
	}
	switch k {
	case jobTransient:
		if j.Attempt <= p.Failures {
			return &demoServiceError{Service: "reports", Status: 503}
		}
	case jobRateLimited:
		if j.Attempt <= p.Failures {
			return retry.RateLimited(&demoServiceError{Service: "reports", Status: 429}, demoJobRetryAfter)
		}
	case jobFinal:
		return retry.Permanent(&demoServiceError{Service: "reports", Status: 422})
	case jobExhaust:
		return &demoServiceError{Service: "reports", Status: 503}
	}
	return nil
}

// demoJobsResult is the jobs part of the summary, as --json prints it.
// The counts are of this run's jobs, read back after the wait: from their
// records (Get), the dead letters (DeadLetters) and the audit stream.
type demoJobsResult struct {
	Queue     string `json:"queue"`
	KeyPrefix string `json:"key_prefix"`
	Planned   int    `json:"planned"`
	Submitted int    `json:"submitted"`
	// CrashSimulated says whether the crashing worker claimed its job
	// before its connection was cut.
	CrashSimulated bool `json:"crash_simulated"`
	// WaitedSeconds is how long the demo waited for the jobs after the
	// workload.
	WaitedSeconds float64 `json:"waited_seconds"`
	// By status, from the records: failed jobs by terminal reason (final:
	// retry.Permanent; max_attempts: exhausted; other: max_age or
	// manual), unfinished ones pending or running when the wait ended.
	Success         int `json:"success"`
	FailedFinal     int `json:"failed_final"`
	FailedExhausted int `json:"failed_exhausted"`
	FailedOther     int `json:"failed_other"`
	Unfinished      int `json:"unfinished"`
	// Attempts sums attempt_count; Retries counts the runs after each
	// job's first; RateLimitedWaits and CrashedRuns count the runs of the
	// records' histories that failed rate-limited or crashed.
	Attempts         int `json:"attempts"`
	Retries          int `json:"retries"`
	RateLimitedWaits int `json:"rate_limited_waits"`
	CrashedRuns      int `json:"crashed_runs"`
	// DeadLetters counts this run's jobs in the dead-letter stream.
	DeadLetters int              `json:"dead_letters"`
	Audit       demoJobsAudit    `json:"audit"`
	Jobs        []demoJobOutcome `json:"jobs"`
}

// demoJobsAudit counts the audit events of this run's jobs.
type demoJobsAudit struct {
	Category string `json:"category"`
	Events   int    `json:"events"`
	// RetryAttempts counts retry_attempt events (a retry was scheduled or
	// a crashed run taken over), by error_class below.
	RetryAttempts int `json:"retry_attempts"`
	Retryable     int `json:"retryable"`
	RateLimited   int `json:"rate_limited"`
	Crashed       int `json:"crashed"`
	// Exhausted counts retry_exhausted events, by stop_reason below.
	Exhausted   int `json:"retry_exhausted"`
	Final       int `json:"final"`
	MaxAttempts int `json:"max_attempts"`
}

// demoJobOutcome is one job of the summary.
type demoJobOutcome struct {
	Key            string `json:"key"`
	Plan           string `json:"plan"`
	Status         string `json:"status"`
	TerminalReason string `json:"terminal_reason,omitempty"`
	Attempts       int    `json:"attempts"`
	DeadLetter     bool   `json:"dead_letter,omitempty"`
}

// demoJobs runs the demo's job queue.
type demoJobs struct {
	run    string
	client *jobs.Client
	plan   []demoJob
	keys   []string // keys of the submitted jobs, in plan order
	prefix string   // "demo-<run>/report/"

	crashed    bool
	crashDone  chan struct{} // closed when the crashing worker's Run returned
	cancelWork context.CancelFunc
	workDone   chan struct{} // closed when the workers' Runs returned
	stopOnce   sync.Once

	mu        sync.Mutex
	submitErr error // the first failed submit
	submitted int
}

// startDemoJobs opens the jobs bucket and streams, simulates the worker
// crash on the plan's first job, and starts the workers. cf dials the
// crashing worker's connection; logs receives the jobs package's
// warnings.
func startDemoJobs(ctx context.Context, run string, plan []demoJob, js jetstream.JetStream, cf connFlags,
	pub audit.Emitter, logs io.Writer) (*demoJobs, error) {
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := jobs.New(ctx, js, jobs.Config{Audit: pub, Logger: logger})
	if err != nil {
		return nil, err
	}
	jd := &demoJobs{run: run, client: client, plan: plan, prefix: "demo-" + run + "/report/",
		crashDone: make(chan struct{}), workDone: make(chan struct{})}
	pol := demoJobPolicy()
	if err := jd.crash(ctx, cf, pub, &pol); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	jd.cancelWork = cancel
	var wg sync.WaitGroup
	for i := range demoJobWorkers {
		w, err := jobs.NewWorker(client, demoJobsQueue, handleDemoJob, jobs.WorkerConfig{
			Concurrency: demoJobConcurrency, Lease: demoJobLease, Policy: &pol,
			Owner: fmt.Sprintf("demo-%s/worker-%d", run, i+1),
		})
		if err != nil {
			cancel()
			wg.Wait()
			return nil, err
		}
		wg.Go(func() {
			if err := w.Run(wctx); err != nil {
				logger.Warn("demo: a jobs worker stopped", "error", err)
			}
		})
	}
	go func() {
		wg.Wait()
		close(jd.workDone)
	}()
	return jd, nil
}

// crash runs the crashing worker on a connection of its own, submits the
// plan's first job (a crash), and once the worker's handler runs it,
// closes the connection without draining: the lease is neither renewed
// nor handed back. The other workers are not started yet, so only the
// crashing worker can claim the job.
func (jd *demoJobs) crash(ctx context.Context, cf connFlags, pub audit.Emitter, pol *retry.Policy) error {
	nc, js, err := cf.connect(ctx, "jetretry-demo-crashing-worker", nil)
	if err != nil {
		close(jd.crashDone)
		return err
	}
	quiet := slog.New(slog.DiscardHandler) // what it cannot do once cut off is the point
	client, err := jobs.New(ctx, js, jobs.Config{Audit: pub, Logger: quiet})
	if err != nil {
		nc.Close()
		close(jd.crashDone)
		return err
	}
	crashKey := jd.key(0)
	claimed := make(chan struct{})
	var once sync.Once
	w, err := jobs.NewWorker(client, demoJobsQueue, func(hctx context.Context, j *jobs.Job) error {
		if j.Key != crashKey {
			return handleDemoJob(hctx, j) // a job left in the queue by an earlier run
		}
		once.Do(func() { close(claimed) })
		<-hctx.Done() // hangs until the worker "dies"
		return hctx.Err()
	}, jobs.WorkerConfig{Concurrency: 1, Lease: demoJobLease, Policy: pol, Owner: fmt.Sprintf("demo-%s/worker-crashing", jd.run)})
	if err != nil {
		nc.Close()
		close(jd.crashDone)
		return err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(jd.crashDone)
		_ = w.Run(wctx)
	}()
	defer func() {
		// The process "dies": the connection goes first, so nothing the
		// worker does on its way out (the handback of a shutdown) reaches
		// the server.
		nc.Close()
		cancel()
	}()
	if err := jd.submit(ctx, jd.plan[0]); err != nil {
		return err
	}
	t := time.NewTimer(demoCrashClaimWait)
	defer t.Stop()
	select {
	case <-claimed:
		jd.crashed = true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}

// key returns the key of job seq: unique to the run.
func (jd *demoJobs) key(seq int) string { return fmt.Sprintf("%s%03d", jd.prefix, seq) }

// submit submits j, bounded in time even when ctx ends.
func (jd *demoJobs) submit(ctx context.Context, j demoJob) error {
	key := jd.key(j.Seq)
	b, _ := json.Marshal(demoJobPayload{Run: jd.run, Seq: j.Seq, Plan: j.Kind.String(), Failures: j.Failures})
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _, err := jd.client.Submit(sctx, demoJobsQueue, key, b, jobs.SubmitOptions{})
	jd.mu.Lock()
	defer jd.mu.Unlock()
	if err != nil {
		if jd.submitErr == nil {
			jd.submitErr = fmt.Errorf("submit job %s: %w", key, err)
		}
		return jd.submitErr
	}
	jd.keys = append(jd.keys, key)
	jd.submitted++
	return nil
}

// submitAll submits the rest of the plan evenly over d, until ctx ends.
func (jd *demoJobs) submitAll(ctx context.Context, d time.Duration) {
	start := time.Now()
	rest := jd.plan[1:]
	every := d / time.Duration(len(jd.plan))
	t := time.NewTimer(0)
	<-t.C
	defer t.Stop()
	for i, j := range rest {
		if wait := time.Until(start.Add(time.Duration(i+1) * every)); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		_ = jd.submit(ctx, j) // counted in submitErr
	}
}

// submittedKeys returns the keys submitted so far.
func (jd *demoJobs) submittedKeys() []string {
	jd.mu.Lock()
	defer jd.mu.Unlock()
	return append([]string(nil), jd.keys...)
}

// wait waits until every submitted job has succeeded or failed, for at
// most grace, or until ctx ends, reporting progress. It returns how long
// it waited.
func (jd *demoJobs) wait(ctx context.Context, grace time.Duration, progress io.Writer) time.Duration {
	start := time.Now()
	keys := jd.submittedKeys()
	open := map[string]bool{}
	for _, k := range keys {
		open[k] = true
	}
	live := isTerminal(progress)
	report := func(final bool) {
		line := fmt.Sprintf("%5.1fs  jobs finished %d/%d", time.Since(start).Seconds(), len(keys)-len(open), len(keys))
		switch {
		case live && final:
			fmt.Fprintf(progress, "\r%s\x1b[K\n", line)
		case live:
			fmt.Fprintf(progress, "\r%s\x1b[K", line)
		default:
			fmt.Fprintln(progress, line)
		}
	}
	poll := func() {
		for k := range open {
			gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			rec, err := jd.client.Get(gctx, k)
			cancel()
			if err == nil && (rec.Status == jobs.StatusSuccess || rec.Status == jobs.StatusFailed) {
				delete(open, k)
			}
		}
	}
	if poll(); len(open) == 0 {
		return time.Since(start)
	}
	fmt.Fprintf(progress, "waiting up to %v for %d of %d jobs to finish (retries are scheduled at whole seconds)\n",
		grace, len(open), len(keys))
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	lastReport := time.Now()
	for len(open) > 0 {
		select {
		case <-ctx.Done():
			report(true)
			fmt.Fprintf(progress, "interrupted: stopped waiting for %d jobs\n", len(open))
			return time.Since(start)
		case <-deadline.C:
			report(true)
			fmt.Fprintf(progress, "stopped waiting after %v: %d jobs unfinished\n", grace, len(open))
			return time.Since(start)
		case <-tick.C:
		}
		poll()
		if live || time.Since(lastReport) >= time.Second {
			report(false)
			lastReport = time.Now()
		}
	}
	report(true)
	return time.Since(start)
}

// stop shuts the workers down (they hand back the runs in progress) and
// waits for them and for the crashed worker, each for at most 10s.
func (jd *demoJobs) stop() {
	jd.stopOnce.Do(func() {
		if jd.cancelWork != nil {
			jd.cancelWork()
			select {
			case <-jd.workDone:
			case <-time.After(10 * time.Second):
			}
		}
		select {
		case <-jd.crashDone:
		case <-time.After(10 * time.Second):
		}
	})
}

// summarize reads this run's jobs back: their records, the dead letters
// and their audit events since since.
func (jd *demoJobs) summarize(ctx context.Context, js jetstream.JetStream, since time.Time, waited time.Duration) (*demoJobsResult, error) {
	res := &demoJobsResult{
		Queue: demoJobsQueue, KeyPrefix: jd.prefix, Planned: len(jd.plan), CrashSimulated: jd.crashed,
		WaitedSeconds: waited.Seconds(), Audit: demoJobsAudit{Category: jobs.DefaultCategory},
	}
	keys := jd.submittedKeys()
	res.Submitted = len(keys)
	dead := map[string]bool{}
	letters, err := jd.client.DeadLetters(ctx, demoJobsQueue, demoDLQLimit)
	if err != nil {
		return nil, fmt.Errorf("read back the dead letters: %w", err)
	}
	for _, r := range letters {
		if strings.HasPrefix(r.Key, jd.prefix) && !dead[r.Key] {
			dead[r.Key] = true
			res.DeadLetters++
		}
	}
	planOf := map[string]jobKind{}
	for _, j := range jd.plan {
		planOf[jd.key(j.Seq)] = j.Kind
	}
	for _, k := range keys {
		rec, err := jd.client.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("read back job %s: %w", k, err)
		}
		o := demoJobOutcome{Key: k, Plan: planOf[k].String(), Status: string(rec.Status),
			TerminalReason: string(rec.TerminalReason), Attempts: rec.AttemptCount, DeadLetter: dead[k]}
		res.Jobs = append(res.Jobs, o)
		switch {
		case rec.Status == jobs.StatusSuccess:
			res.Success++
		case rec.Status == jobs.StatusFailed && rec.TerminalReason == jobs.TerminalFinal:
			res.FailedFinal++
		case rec.Status == jobs.StatusFailed && rec.TerminalReason == jobs.TerminalMaxAttempts:
			res.FailedExhausted++
		case rec.Status == jobs.StatusFailed:
			res.FailedOther++
		default:
			res.Unfinished++
		}
		res.Attempts += rec.AttemptCount
		res.Retries += max(rec.AttemptCount-1, 0)
		for _, r := range rec.History {
			switch {
			case r.Outcome == jobs.OutcomeCrashed:
				res.CrashedRuns++
			case r.ErrorClass == jobs.ClassRateLimited:
				res.RateLimitedWaits++
			}
		}
	}

	// The jobs' audit events carry no tenant_id: this run's are those of
	// the jobs category whose correlation_id (the job key) is the run's.
	events, err := audit.Query(ctx, js, audit.StreamConfig{}, audit.Filter{
		Types:      []audit.Type{audit.TypeRetryAttempt, audit.TypeRetryExhausted, audit.TypeManualOverride},
		Categories: []string{jobs.DefaultCategory}, Since: since,
	})
	if err != nil && !errors.Is(err, audit.ErrUndecodable) {
		return nil, fmt.Errorf("read back the jobs' audit events: %w", err)
	}
	a := &res.Audit
	for _, e := range events {
		if e.Operation != "jobs."+demoJobsQueue || !strings.HasPrefix(e.CorrelationID, jd.prefix) {
			continue
		}
		a.Events++
		switch e.Type {
		case audit.TypeRetryAttempt:
			a.RetryAttempts++
			switch e.AdditionalContext["error_class"] {
			case string(jobs.ClassRateLimited):
				a.RateLimited++
			case string(jobs.ClassCrashed):
				a.Crashed++
			default:
				a.Retryable++
			}
		case audit.TypeRetryExhausted:
			a.Exhausted++
			switch e.StopReason {
			case string(jobs.TerminalFinal):
				a.Final++
			case string(jobs.TerminalMaxAttempts):
				a.MaxAttempts++
			}
		}
	}
	return res, nil
}

// printDemoJobs writes the jobs part of the summary.
func printDemoJobs(w io.Writer, j *demoJobsResult) error {
	fmt.Fprintf(w, "\nDurable jobs on the queue %s: %d of %d planned submitted, keys %sNNN.\n",
		j.Queue, j.Submitted, j.Planned, j.KeyPrefix)
	fmt.Fprintf(w, "Read back from their records (bucket %s), the dead letters (stream %s)\n",
		jobs.DefaultBucket, jobs.DefaultDLQStream)
	fmt.Fprintf(w, "and their %d audit events (category %s; correlation_id is the job key).\n\n",
		j.Audit.Events, j.Audit.Category)
	rows := []struct {
		name        string
		recs, audit string
		note        string
	}{
		{"success", demoCount(j.Success), "-", ""},
		{"failed, final", demoCount(j.FailedFinal), demoCount(j.Audit.Final), "retry.Permanent: not retried"},
		{"failed, exhausted", demoCount(j.FailedExhausted), demoCount(j.Audit.MaxAttempts), "out of attempts"},
		{"failed, other", demoCount(j.FailedOther), "-", "max_age or manual"},
		{"unfinished", demoCount(j.Unfinished), "-", "pending or running when the wait ended"},
		{"dead letters", demoCount(j.DeadLetters), "-", "failed jobs, with their run history"},
		{"attempts", demoCount(j.Attempts), "-", "runs (attempt_count)"},
		{"retries", demoCount(j.Retries), demoCount(j.Audit.RetryAttempts), "runs after a job's first"},
		{"rate-limited waits", demoCount(j.RateLimitedWaits), demoCount(j.Audit.RateLimited), "retried after the hint, budget kept"},
		{"crashed runs", demoCount(j.CrashedRuns), demoCount(j.Audit.Crashed), "lease expired; run again elsewhere"},
	}
	fmt.Fprintf(w, "%-18s  %7s  %5s\n", "JOBS", "RECORDS", "AUDIT")
	for _, r := range rows {
		if r.name == "failed, other" && j.FailedOther == 0 {
			continue
		}
		line := fmt.Sprintf("%-18s  %7s  %5s", r.name, r.recs, r.audit)
		if r.note != "" {
			line += "  " + r.note
		}
		fmt.Fprintln(w, line)
	}
	crash := "One worker crash was simulated"
	if !j.CrashSimulated {
		crash = "No worker crash was simulated (the crashing worker did not claim its job in time)"
	}
	_, err := fmt.Fprintf(w, `
RECORDS  from the job records (dead letters: from the dead-letter stream)
AUDIT    retry_exhausted events by stop_reason (final, max_attempts), and
         retry_attempt events by error_class (rate_limited, crashed)

%s; the demo waited %.1fs for the jobs after the workload.
`, crash, j.WaitedSeconds)
	return err
}
