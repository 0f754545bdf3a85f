package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
)

const jobsRequeueUsage = `Usage: jetretry jobs requeue KEY... [--reason TEXT]
       jetretry jobs requeue --queue Q [--status failed] [--terminal] [--limit N] [--yes] [--dry-run] [--reason TEXT]

Moves failed jobs back to pending, with their retry budget reset and their
terminal designation cleared, and dispatches them to their queue's
workers. It is the only way out of failed; attempt_count keeps counting.

The first form requeues the jobs named by their logical keys. The second
selects the failed jobs of queue Q, oldest first, at most --limit (of at
most 10000 job records read). Requeueing more than 100 jobs at once needs
--yes; --dry-run prints what would be requeued and changes nothing.

Each requeue is audited: a manual_override event (override "requeue", the
job, the operator and --reason) is published to the audit stream, which
is created if it does not exist. One line is printed per job, and a
summary for several. A job that is not failed, or not found, is reported
and the others go ahead; the exit status is then 1.

Examples:
  jetretry jobs requeue source/customer-42/query/2026-11-20 --reason "upstream fixed"
  jetretry jobs requeue --queue reports --status failed --dry-run
  jetretry jobs requeue --queue reports --status failed --limit 50 --reason "quota raised"
  jetretry jobs requeue --queue reports --status failed --yes --reason "replay after the outage"
`

const jobsReprocessUsage = `Usage: jetretry jobs reprocess KEY [--reason TEXT]

Runs a successful job again. If the rerun succeeds, its run becomes
current; if it fails for good, the earlier success stays current and the
job goes back to success. Audited as a manual_override event (override
"reprocess", with the operator and --reason) in the audit stream, which
is created if it does not exist. Exits with status 1 when the job has
not succeeded or does not exist.

Examples:
  jetretry jobs reprocess source/customer-42/query/2026-11-20 --reason "validator fixed"
`

const jobsCancelUsage = `Usage: jetretry jobs cancel KEY [--reason TEXT]

Ends a pending or running job as failed and terminal (reason manual). A
running handler's context is cancelled at its next lease renewal, and its
outcome is discarded. Cancelling a pending reprocess leaves the earlier
success current. Audited as a manual_override event (override "cancel",
with the operator and --reason) in the audit stream, which is created if
it does not exist. Exits with status 1 when the job has finished or does
not exist.

Examples:
  jetretry jobs cancel source/customer-42/query/2026-11-20 --reason "customer offboarded"
`

const jobsKickUsage = `Usage: jetretry jobs kick KEY...

Dispatch a pending job again: repairs a requeue or reprocess whose
dispatch failed, or a job whose submit failed after writing its record.
Extra dispatches are harmless.

Each job, named by its logical key, is dispatched to its queue's workers
under the dispatch token its record names. Workers drop a dispatch whose
token the record no longer names, so a copy of one that already ran does
nothing; a job waiting for a retry runs at once instead of at its
next_retry_at. Only a pending job can be kicked.

Kick does not change the job record and is not audited: no
manual_override event is published, and it takes no --reason. One line
is printed per job, and a summary for several. A job that is not
pending, or not found, is reported and the others go ahead; the exit
status is then 1.

Examples:
  jetretry jobs kick source/customer-42/query/2026-11-20
  jetretry jobs list --queue reports --status pending --json | jq -r '.[].key' | xargs jetretry jobs kick
`

const jobsSweepUsage = `Usage: jetretry jobs sweep [--queue Q] [--grace DURATION] [--limit N] [--dry-run] [--json]

Finds stranded jobs and dispatches them again. A job is stranded when it
is pending but its dispatch is gone: a requeue or reprocess died between
writing the record and dispatching it, or the work stream was purged.
Extra dispatches are harmless.

A pending job counts as stranded once it has been due (its next_retry_at,
or else the last change of its record) for longer than --grace, and its
queue's run subject holds no dispatch that old. Dispatches wait on the
run subject, oldest first, until they are handled, so a job queued behind
a backlog is not taken for stranded. --grace must exceed the difference
between the clocks of the clients and the servers. --queue sweeps one
queue; at most --limit job records are read.

Each stranded job is dispatched to its queue's workers under the dispatch
token its record names, as "jetretry jobs kick" does. Sweep does not
change any job record and is not audited: no manual_override event is
published. One line is printed per stranded job, then a summary;
--dry-run finds them and dispatches nothing. With --json it prints a
JSON array of the stranded jobs' records instead. If the sweep fails
part way, what it dispatched is printed and the exit status is 1.

Workers can sweep their own queue by themselves: set WorkerConfig.SweepEvery
(Go package jobs).

Examples:
  jetretry jobs sweep --dry-run
  jetretry jobs sweep --queue reports --grace 5m
`

// requeueConfirmAbove is the most jobs one requeue resets without --yes
// (seed 003: confirmation before resetting large ranges).
const requeueConfirmAbove = 100

// overrideFlags are the flags of the commands that change jobs.
type overrideFlags struct {
	jobsFlags
	reason                   string
	auditStream, auditPrefix string
}

func (o *overrideFlags) register(fs *flagSet) {
	o.jobsFlags.register(fs, false)
	fs.StringVar(&o.reason, "reason", "", "why, kept in the audit event")
	fs.StringVar(&o.auditStream, "audit-stream", audit.DefaultStreamName, "audit stream `name`")
	fs.StringVar(&o.auditPrefix, "audit-prefix", audit.DefaultSubjectPrefix, "audit subject `prefix`")
}

func (o *overrideFlags) auditConfig() (audit.StreamConfig, error) {
	cfg := audit.StreamConfig{Name: o.auditStream, SubjectPrefix: o.auditPrefix}
	if err := cfg.Validate(); err != nil {
		return cfg, usagef("--audit-stream/--audit-prefix: %v", err)
	}
	return cfg.WithDefaults(), nil
}

// open connects, makes sure the audit stream exists (an existing one is
// used as it is), and returns a jobs client whose audit events go to it.
func (o *overrideFlags) open(ctx context.Context, name string, cfg audit.StreamConfig, stderr io.Writer) (*nats.Conn, *jobs.Client, *overrideAudit, error) {
	em := &overrideAudit{prefix: cfg.SubjectPrefix, command: "jetretry " + name, reason: o.reason, operator: os.Getenv("USER")}
	nc, js, c, err := o.jobsFlags.open(ctx, name, em, stderr)
	if err != nil {
		return nil, nil, nil, err
	}
	em.js = js
	if _, err := js.Stream(ctx, cfg.Name); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := audit.EnsureStream(ctx, js, cfg); err != nil {
			nc.Close()
			return nil, nil, nil, o.conn.jsError("create audit stream "+cfg.Name, err)
		}
	} else if err != nil {
		nc.Close()
		return nil, nil, nil, o.conn.jsError("open audit stream "+cfg.Name, err)
	}
	return nc, c, em, nil
}

// overrideAudit is the audit.Emitter of the jobs client of the commands
// that change jobs. The client emits one manual_override event per change;
// overrideAudit adds the operator, the command and the reason, publishes
// it to the audit stream before the call returns, and keeps what became of
// it by job key. It is safe for concurrent use.
type overrideAudit struct {
	js                        jetstream.JetStream
	prefix                    string
	command, reason, operator string

	mu   sync.Mutex
	sent map[string]auditSent
}

var _ audit.Emitter = (*overrideAudit)(nil)

// auditSent is the fate of a job's event.
type auditSent struct {
	event audit.Event
	err   error
}

// Emit publishes e and waits for the stream's acknowledgement.
func (a *overrideAudit) Emit(ctx context.Context, e audit.Event) error {
	ac := maps.Clone(e.AdditionalContext)
	if ac == nil {
		ac = map[string]any{}
	}
	ac["command"] = a.command
	if a.operator != "" {
		ac["operator"] = a.operator
	}
	if a.reason != "" {
		ac["reason"] = a.reason
	}
	e.AdditionalContext = ac
	if e.EventID == "" {
		e.EventID = audit.NewEventID()
	}
	err := e.Validate()
	if err == nil {
		msg := &nats.Msg{Subject: audit.Subject(a.prefix, e), Data: e.AppendJSON(nil), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, e.EventID)
		_, err = a.js.PublishMsg(ctx, msg)
	}
	key, _ := ac["job_key"].(string)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent == nil {
		a.sent = map[string]auditSent{}
	}
	a.sent[key] = auditSent{event: e, err: err}
	return err
}

// take returns and forgets what became of key's event.
func (a *overrideAudit) take(key string) (auditSent, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.sent[key]
	delete(a.sent, key)
	return s, ok
}

// transitionHints complete an invalid transition's message.
var transitionHints = map[string]string{
	"requeue":   "only a failed job can be requeued",
	"reprocess": "only a successful job can be reprocessed",
	"cancel":    "only a pending or running job can be cancelled",
	"kick":      "only a pending job can be kicked",
}

// override runs op (requeue, reprocess or cancel) on key and returns its
// one-line result. The error is one line too; done reports whether the job
// was changed, which it may be despite an error (its audit event or
// dispatch failed).
func (o *overrideFlags) override(ctx context.Context, c *jobs.Client, em *overrideAudit, op, key string) (result string, done bool, err error) {
	var rec jobs.Record
	switch op {
	case "requeue":
		rec, err = c.Requeue(ctx, key)
	case "reprocess":
		rec, err = c.Reprocess(ctx, key)
	case "cancel":
		rec, err = c.Cancel(ctx, key)
	default:
		panic("jobs: unknown override " + op)
	}
	sent, emitted := em.take(key)
	if err != nil && !emitted {
		var te *jobs.TransitionError
		if errors.As(err, &te) {
			return "", false, fmt.Errorf("%w: %s", err, transitionHints[op])
		}
		return "", false, o.jobError(op+" job "+key, key, err)
	}
	switch {
	case err != nil:
		// Changed, but not dispatched.
		return "", true, o.conn.jsError(op+" job "+key, err)
	case !emitted:
		return "", true, fmt.Errorf("job %q: %s done, but no audit event was emitted", key, op)
	case sent.err != nil:
		return "", true, o.conn.jsError(fmt.Sprintf("job %q: %s done, but its audit event %s was not published", key, op, sent.event.EventID), sent.err)
	}
	ac := sent.event.AdditionalContext
	audited := "audit event " + sent.event.EventID
	switch op {
	case "requeue":
		was, _ := ac["previous_terminal_reason"].(string)
		return fmt.Sprintf("requeued %q: %s in queue %s (was %s, attempt_count %d); %s",
			key, rec.Status, rec.Queue, cmp.Or(was, "failed"), rec.AttemptCount, audited), true, nil
	case "reprocess":
		return fmt.Sprintf("reprocessing %q: %s in queue %s; run %s stays current unless the rerun succeeds; %s",
			key, rec.Status, rec.Queue, cmp.Or(rec.CurrentRunID, "-"), audited), true, nil
	}
	if rec.Status == jobs.StatusSuccess {
		return fmt.Sprintf("cancelled the reprocess of %q: success stays current (run %s); %s", key, rec.CurrentRunID, audited), true, nil
	}
	note := ""
	if ac["status"] == string(jobs.StatusRunning) {
		note = ", its handler is stopped at its next lease renewal"
	}
	return fmt.Sprintf("cancelled %q: %s, terminal (%s)%s; %s", key, rec.Status, rec.TerminalReason, note, audited), true, nil
}

// runJobsOverride is reprocess and cancel: one KEY, one line.
func runJobsOverride(op, usage string) func(context.Context, []string, io.Writer, io.Writer) error {
	name := "jobs " + op
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		var o overrideFlags
		fs := newFlags(name, usage, stdout)
		o.register(fs)
		if err := parse(fs, args); err != nil {
			return err
		}
		pos, err := fs.positional("KEY")
		if err != nil {
			return err
		}
		if pos[0] == "" {
			return usagef("empty KEY")
		}
		cfg, err := o.auditConfig()
		if err != nil {
			return err
		}
		nc, c, em, err := o.open(ctx, name, cfg, stderr)
		if err != nil {
			return err
		}
		defer nc.Close()
		line, _, err := o.override(ctx, c, em, op, pos[0])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, line)
		return err
	}
}

func runJobsRequeue(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o overrideFlags
	var s selectFlags
	fs := newFlags("jobs requeue", jobsRequeueUsage, stdout)
	o.register(fs)
	s.register(fs, "the `status` selected with --queue: failed, the only one that can be requeued (the default)")
	yes := fs.Bool("yes", false, fmt.Sprintf("confirm a requeue of more than %d jobs", requeueConfirmAbove))
	dryRun := fs.Bool("dry-run", false, "print what would be requeued, change nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	keys := dedupe(fs.Args())
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	rangeForm := set["queue"] || set["status"] || set["terminal"] || set["limit"]
	switch {
	case len(keys) > 0 && rangeForm:
		return usagef("give job KEYs, or --queue to select failed jobs, not both")
	case len(keys) == 0 && !set["queue"]:
		return usagef("missing KEY... or --queue Q")
	case s.status != "" && s.status != string(jobs.StatusFailed):
		return usagef("--status %q: only failed jobs can be requeued", s.status)
	}
	for _, k := range keys {
		if k == "" {
			return usagef("empty KEY")
		}
	}
	s.status = string(jobs.StatusFailed)
	f, err := s.filter()
	if err != nil {
		return err
	}
	cfg, err := o.auditConfig()
	if err != nil {
		return err
	}
	if err := confirmRange(len(keys), *yes || *dryRun); err != nil {
		return err
	}
	var nc *nats.Conn
	var c *jobs.Client
	var em *overrideAudit
	if *dryRun {
		nc, _, c, err = o.jobsFlags.open(ctx, "jobs requeue", nil, stderr)
	} else {
		nc, c, em, err = o.open(ctx, "jobs requeue", cfg, stderr)
	}
	if err != nil {
		return err
	}
	defer nc.Close()

	var recs []jobs.Record // the selection, with --queue or --dry-run
	if rangeForm {
		if recs, err = selectJobs(ctx, c, f, s.limit); err != nil {
			return o.conn.jsError("list jobs in bucket "+o.bucket, err)
		}
		if len(recs) == 0 {
			fmt.Fprintf(stderr, "jetretry jobs requeue: no failed jobs in queue %s match\n", s.queue)
			return nil
		}
		keys = keys[:0]
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		if err := confirmRange(len(keys), *yes || *dryRun); err != nil {
			return err
		}
	}
	if *dryRun {
		return requeueDryRun(ctx, &o, c, keys, recs, stdout)
	}

	return perKey(ctx, stdout, keys, len(keys) == 1 && !rangeForm, "requeued", func(key string) (string, error) {
		line, _, err := o.override(ctx, c, em, "requeue", key)
		return line, err
	})
}

// perKey runs do for each key and prints its line, or "not <done> KEY:
// error", then a summary; it stops when ctx ends. With single (one KEY was
// given), the line or the error is all there is.
func perKey(ctx context.Context, stdout io.Writer, keys []string, single bool, done string, do func(key string) (string, error)) error {
	if single {
		line, err := do(keys[0])
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, line)
		return err
	}
	var failed int
	for i, key := range keys {
		if ctx.Err() != nil {
			fmt.Fprintf(stdout, "interrupted: %s %d of %d jobs, %d not %s, %d not tried\n", done, i-failed, len(keys), failed, done, len(keys)-i)
			return fmt.Errorf("interrupted after %d of %d jobs", i, len(keys))
		}
		line, err := do(key)
		if err != nil {
			failed++
			line = fmt.Sprintf("not %s %q: %s", done, key, oneLine(err.Error()))
		}
		fmt.Fprintln(stdout, line)
	}
	fmt.Fprintf(stdout, "%s %d of %d jobs, %d not %s\n", done, len(keys)-failed, len(keys), failed, done)
	if failed > 0 {
		return fmt.Errorf("%d of %d jobs were not %s", failed, len(keys), done)
	}
	return nil
}

func runJobsKick(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var j jobsFlags
	fs := newFlags("jobs kick", jobsKickUsage, stdout)
	j.register(fs, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	keys := dedupe(fs.Args())
	if len(keys) == 0 {
		return usagef("missing KEY...")
	}
	for _, k := range keys {
		if k == "" {
			return usagef("empty KEY")
		}
	}
	nc, _, c, err := j.open(ctx, "jobs kick", nil, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()

	return perKey(ctx, stdout, keys, len(keys) == 1, "kicked", func(key string) (string, error) {
		return j.kick(ctx, c, key)
	})
}

func runJobsSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var j jobsFlags
	fs := newFlags("jobs sweep", jobsSweepUsage, stdout)
	j.register(fs, true)
	queue := fs.String("queue", "", "sweep queue `Q` only (default: every queue)")
	grace := fs.Duration("grace", time.Minute, "how long a pending job may be due without its dispatch before it counts as stranded")
	limit := fs.Int("limit", 10000, "read at most `N` job records")
	dryRun := fs.Bool("dry-run", false, "find the stranded jobs, dispatch nothing")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	if err := checkQueueFlag(*queue); err != nil {
		return err
	}
	if *grace <= 0 {
		return usagef("--grace must be positive")
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	nc, _, c, err := j.open(ctx, "jobs sweep", nil, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()

	found, err := c.Sweep(ctx, jobs.SweepOptions{Queue: *queue, Grace: *grace, DryRun: *dryRun, Limit: *limit})
	switch {
	case errors.Is(err, jobs.ErrInvalidConfig):
		return usagef("%v", err)
	case err != nil:
		err = j.conn.jsError("sweep jobs in bucket "+j.bucket, err)
	}
	// With its error, Sweep returns the jobs it dispatched before it; the
	// error names the job it could not dispatch.
	if j.asJSON {
		if werr := writeJobsJSON(stdout, found); werr != nil && err == nil {
			err = werr
		}
		return err
	}
	if werr := writeSweep(stdout, found, *dryRun, err != nil); werr != nil && err == nil {
		err = werr
	}
	return err
}

// writeSweep prints the stranded jobs of a sweep, one line each, and a
// summary. done are the jobs dispatched (or found, on a dry run), before
// the error when the sweep failed. A sweep that failed before handling
// any job prints nothing.
func writeSweep(w io.Writer, done []jobs.Record, dryRun, failed bool) error {
	what := "dispatched again"
	if dryRun {
		what = "would dispatch (dry run)"
	}
	for _, r := range done {
		// The time the sweep counts from: the later of the last change and
		// the retry time.
		due := r.UpdatedAt
		if r.NextRetryAt.After(due) {
			due = r.NextRetryAt
		}
		fmt.Fprintf(w, "stranded %q in queue %s, due %s: %s\n", r.Key, r.Queue, jobTime(due), what)
	}
	n := len(done)
	var err error
	switch {
	case failed && n == 0:
		// The error says it all.
	case failed && dryRun:
		_, err = fmt.Fprintf(w, "found %s before the error (dry run: nothing dispatched)\n", strandedJobs(n))
	case failed:
		_, err = fmt.Fprintf(w, "swept %s before the error; sweep again to finish\n", strandedJobs(n))
	case n == 0:
		_, err = fmt.Fprintln(w, "no stranded jobs")
	case dryRun:
		_, err = fmt.Fprintf(w, "found %s (dry run: nothing dispatched)\n", strandedJobs(n))
	default:
		_, err = fmt.Fprintf(w, "swept %s\n", strandedJobs(n))
	}
	return err
}

// strandedJobs is "1 stranded job" or "N stranded jobs".
func strandedJobs(n int) string {
	if n == 1 {
		return "1 stranded job"
	}
	return fmt.Sprintf("%d stranded jobs", n)
}

// kick dispatches the pending job key again and returns its one-line
// result, or a one-line error.
func (j *jobsFlags) kick(ctx context.Context, c *jobs.Client, key string) (string, error) {
	err := c.Kick(ctx, key)
	var te *jobs.TransitionError
	switch {
	case err == nil:
		return fmt.Sprintf("kicked %q: dispatched again under its current token", key), nil
	case errors.As(err, &te) && te.From == jobs.StatusPending:
		// Pending without a dispatch token: nothing to dispatch.
		return "", fmt.Errorf("%w: it has no dispatch token", err)
	case errors.As(err, &te):
		return "", fmt.Errorf("%w: %s", err, transitionHints["kick"])
	}
	return "", j.jobError("kick job "+key, key, err)
}

// confirmRange refuses a requeue of more than requeueConfirmAbove jobs
// unless confirmed.
func confirmRange(n int, confirmed bool) error {
	if n > requeueConfirmAbove && !confirmed {
		return usagef("%d jobs selected, more than %d: add --yes to requeue them all, or narrow the selection (--limit; --dry-run lists it)",
			n, requeueConfirmAbove)
	}
	return nil
}

// requeueDryRun prints what a requeue of keys would do. recs are their
// records when already read.
func requeueDryRun(ctx context.Context, o *overrideFlags, c *jobs.Client, keys []string, recs []jobs.Record, stdout io.Writer) error {
	var n int
	for i, key := range keys {
		var r jobs.Record
		var err error
		if recs != nil {
			r = recs[i]
		} else if r, err = c.Get(ctx, key); err != nil {
			fmt.Fprintf(stdout, "cannot requeue %q: %s\n", key, oneLine(o.jobError("read job "+key, key, err).Error()))
			continue
		}
		if r.Status != jobs.StatusFailed {
			fmt.Fprintf(stdout, "cannot requeue %q: it is %s; %s\n", key, r.Status, transitionHints["requeue"])
			continue
		}
		n++
		fmt.Fprintf(stdout, "would requeue %q: failed in queue %s (%s, attempt_count %d, %s)\n",
			key, r.Queue, cmp.Or(string(r.TerminalReason), "terminal"), r.AttemptCount, cmp.Or(printable(r.LastError, 60), "no error"))
	}
	_, err := fmt.Fprintf(stdout, "would requeue %d of %d jobs (dry run: nothing changed)\n", n, len(keys))
	return err
}

// dedupe returns keys without repeats, in their first order.
func dedupe(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
