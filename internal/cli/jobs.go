package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
)

const jobsIntro = `Operates durable jobs: lists and inspects the job records of the KV
bucket (default JETRETRY_JOBS), reads the dead letters, requeues,
reprocesses, cancels or kicks jobs, and sweeps up stranded ones. Nothing
here creates the bucket or the streams: they come from the first worker
(or "jetretry demo").

Requeue, reprocess and cancel are manual overrides: each one is published
to the audit stream as a manual_override event that names the operator
($USER) and carries --reason. Kick and sweep only dispatch pending jobs
again (kick the jobs named, sweep those whose dispatch is gone): they
change no record and are not audited.
`

const jobsListUsage = `Usage: jetretry jobs list [--queue Q] [--status S] [--terminal] [--limit N] [--json]

Prints the jobs that match as a table, oldest first: key, queue, status,
terminal designation (its reason), attempt_count, retry budget used, next
retry time, last update and last error (cut). --status is pending,
running, success or failed; --terminal keeps terminal jobs only, and
--terminal=false the others; --limit prints at most N jobs. With --json
it prints a JSON array of the job records, run history included.

At most 10000 job records are read.

Examples:
  jetretry jobs list --status failed
  jetretry jobs list --queue reports --terminal --limit 20
  jetretry jobs list --status pending --json | jq -r '.[].key'
`

const jobsInspectUsage = `Usage: jetretry jobs inspect KEY [--json]

Prints one job: its status and terminal designation, attempt_count and
retry budget used, current_run_id (the run whose success is current), the
last error and its class, next_retry_at, the run in progress, the payload,
and its run history: each run's run_id, attempt, start and end, outcome,
error class and error. KEY is the job's logical key, as submitted. With
--json it prints the job record. Exits with status 1 when there is no
such job.

Examples:
  jetretry jobs inspect source/customer-42/query/2026-11-20
  jetretry jobs inspect source/customer-42/query/2026-11-20 --json | jq '.history[-1]'
`

const jobsDeadUsage = `Usage: jetretry jobs dead [--queue Q] [--limit N] [--json]

Prints the dead letters of the dead-letter stream (default
JETRETRY_JOBS_DLQ), oldest first: each job as it failed for good, with its
terminal reason, attempt_count, error class and last error. --queue reads
one queue's dead letters, --limit at most N. A dead letter is a copy made
when the job failed: the job may have been requeued since, which
"jetretry jobs inspect KEY" shows. With --json it prints a JSON array of
the records, run history included.

Examples:
  jetretry jobs dead
  jetretry jobs dead --queue reports --limit 10
  jetretry jobs dead --json | jq -r '.[] | [.key, .terminal_reason] | @tsv'
`

// jobsFlags are the connection, bucket and stream flags of the jobs
// commands.
type jobsFlags struct {
	conn              connFlags
	bucket, work, dlq string
	asJSON            bool
}

func (j *jobsFlags) register(fs *flagSet, withJSON bool) {
	j.conn.register(fs)
	fs.StringVar(&j.bucket, "bucket", jobs.DefaultBucket, "jobs KV `bucket`")
	fs.StringVar(&j.work, "stream", jobs.DefaultStream, "jobs work-queue stream `name`")
	fs.StringVar(&j.dlq, "dlq-stream", jobs.DefaultDLQStream, "jobs dead-letter stream `name`")
	if withJSON {
		fs.BoolVar(&j.asJSON, "json", false, "print JSON")
	}
}

// jobsName is the rule jobs.Config applies to bucket and stream names.
var jobsName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// jobsQueue is the rule jobs applies to queue names.
var jobsQueue = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// check reports bad names as usage errors.
func (j *jobsFlags) check() error {
	for _, f := range []struct{ flag, value string }{{"--bucket", j.bucket}, {"--stream", j.work}, {"--dlq-stream", j.dlq}} {
		if !jobsName.MatchString(f.value) {
			return usagef("%s %q: use letters, digits, '-' and '_'", f.flag, f.value)
		}
	}
	return nil
}

func checkQueueFlag(q string) error {
	if q != "" && !jobsQueue.MatchString(q) {
		return usagef("--queue %q: use 1 to 64 letters, digits, '-' and '_'", q)
	}
	return nil
}

// open connects and returns a jobs client on the bucket and streams, which
// must exist: jobs.New would create them, so they are looked up first and
// a typo in a flag or the wrong server is reported, not papered over. em
// receives the client's audit events (nil: none).
func (j *jobsFlags) open(ctx context.Context, name string, em audit.Emitter, stderr io.Writer) (*nats.Conn, jetstream.JetStream, *jobs.Client, error) {
	if err := j.check(); err != nil {
		return nil, nil, nil, err
	}
	nc, js, err := j.conn.connect(ctx, "jetretry "+name, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	fail := func(err error) (*nats.Conn, jetstream.JetStream, *jobs.Client, error) {
		nc.Close()
		return nil, nil, nil, err
	}
	const hint = `(run a worker or "jetretry demo" first)`
	if _, err := js.KeyValue(ctx, j.bucket); err != nil {
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fail(fmt.Errorf("no jobs bucket %s at %s %s", j.bucket, j.conn.displayURL(), hint))
		}
		return fail(j.conn.jsError("open jobs bucket "+j.bucket, err))
	}
	for _, s := range []string{j.work, j.dlq} {
		if _, err := js.Stream(ctx, s); err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fail(fmt.Errorf("no jobs stream %s at %s %s", s, j.conn.displayURL(), hint))
			}
			return fail(j.conn.jsError("open jobs stream "+s, err))
		}
	}
	// The client logs what it cannot return (an undecodable dead letter):
	// warnings go to stderr, without the time.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	c, err := jobs.New(ctx, js, jobs.Config{Bucket: j.bucket, Stream: j.work, DLQStream: j.dlq, Audit: em, Logger: logger})
	if err != nil {
		return fail(j.conn.jsError("open jobs", err))
	}
	return nc, js, c, nil
}

// jobError turns an error of a jobs call about key into a one-line
// message.
func (j *jobsFlags) jobError(what, key string, err error) error {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return fmt.Errorf("no job with key %q in bucket %s", key, j.bucket)
	case errors.Is(err, jobs.ErrUnavailable):
		return j.conn.jsError(what, err)
	}
	return err
}

// optBool is a boolean flag that remembers whether it was given.
type optBool struct{ v *bool }

func (o *optBool) String() string {
	if o == nil || o.v == nil {
		return ""
	}
	return strconv.FormatBool(*o.v)
}

func (o *optBool) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	o.v = &b
	return nil
}

func (o *optBool) IsBoolFlag() bool { return true }

// selectFlags are the flags that select jobs with jobs.Client.List.
type selectFlags struct {
	queue, status string
	terminal      optBool
	limit         int
}

// register adds the flags; status adds --status.
func (s *selectFlags) register(fs *flagSet, status string) {
	fs.StringVar(&s.queue, "queue", "", "keep the jobs of queue `Q`")
	if status != "" {
		fs.StringVar(&s.status, "status", "", status)
	}
	fs.Var(&s.terminal, "terminal", "keep terminal jobs (--terminal=false: the others)")
	fs.IntVar(&s.limit, "limit", 0, "at most `N` jobs, oldest first (0: all)")
}

// filter returns the jobs filter of the flags, or a usage error.
func (s *selectFlags) filter() (jobs.Filter, error) {
	if err := checkQueueFlag(s.queue); err != nil {
		return jobs.Filter{}, err
	}
	if s.limit < 0 {
		return jobs.Filter{}, usagef("--limit must not be negative")
	}
	f := jobs.Filter{Queue: s.queue, Status: jobs.Status(s.status), Terminal: s.terminal.v}
	switch f.Status {
	case "", jobs.StatusPending, jobs.StatusRunning, jobs.StatusSuccess, jobs.StatusFailed:
	default:
		return f, usagef("--status %q: want pending, running, success or failed", s.status)
	}
	return f, nil
}

// selectJobs lists the jobs of f, oldest first, at most limit (0: all).
func selectJobs(ctx context.Context, c *jobs.Client, f jobs.Filter, limit int) ([]jobs.Record, error) {
	recs, err := c.List(ctx, f)
	if err != nil {
		return nil, err
	}
	sortRecords(recs, func(r jobs.Record) time.Time { return r.CreatedAt })
	if limit > 0 && len(recs) > limit {
		recs = recs[:limit]
	}
	return recs, nil
}

// sortRecords orders records by the time at, then key.
func sortRecords(recs []jobs.Record, at func(jobs.Record) time.Time) {
	slices.SortStableFunc(recs, func(a, b jobs.Record) int {
		return cmp.Or(at(a).Compare(at(b)), strings.Compare(a.Key, b.Key))
	})
}

func runJobsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var j jobsFlags
	var s selectFlags
	fs := newFlags("jobs list", jobsListUsage, stdout)
	j.register(fs, true)
	s.register(fs, "keep jobs in status `S`: pending, running, success or failed")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	f, err := s.filter()
	if err != nil {
		return err
	}
	nc, _, c, err := j.open(ctx, "jobs list", nil, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()
	recs, err := selectJobs(ctx, c, f, s.limit)
	if err != nil {
		return j.conn.jsError("list jobs in bucket "+j.bucket, err)
	}
	if j.asJSON {
		return writeJobsJSON(stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(stderr, "jetretry jobs list: no matching jobs")
		return nil
	}
	return writeJobsTable(stdout, recs)
}

func runJobsInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var j jobsFlags
	fs := newFlags("jobs inspect", jobsInspectUsage, stdout)
	j.register(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	pos, err := fs.positional("KEY")
	if err != nil {
		return err
	}
	key := pos[0]
	if key == "" {
		return usagef("empty KEY")
	}
	nc, _, c, err := j.open(ctx, "jobs inspect", nil, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()
	rec, err := c.Get(ctx, key)
	if err != nil {
		return j.jobError("read job "+key, key, err)
	}
	if j.asJSON {
		return writeJobJSON(stdout, toJobJSON(rec))
	}
	return writeJob(stdout, rec)
}

func runJobsDead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var j jobsFlags
	fs := newFlags("jobs dead", jobsDeadUsage, stdout)
	j.register(fs, true)
	queue := fs.String("queue", "", "read the dead letters of queue `Q` only")
	limit := fs.Int("limit", 0, "at most `N` dead letters, oldest first (0: all, up to 1000 a queue)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	if err := checkQueueFlag(*queue); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	nc, js, c, err := j.open(ctx, "jobs dead", nil, stderr)
	if err != nil {
		return err
	}
	defer nc.Close()
	queues := []string{*queue}
	if *queue == "" {
		if queues, err = deadQueues(ctx, js, j.dlq); err != nil {
			return j.conn.jsError("read dead-letter stream "+j.dlq, err)
		}
	}
	// DeadLetters reads the oldest first in stream order; the time a job
	// failed orders them across queues (and workers), so --limit applies
	// after reading at least the library's default per queue.
	var recs []jobs.Record
	for _, q := range queues {
		got, err := c.DeadLetters(ctx, q, max(*limit, 1000))
		if err != nil {
			return j.conn.jsError("read dead letters of queue "+q, err)
		}
		recs = append(recs, got...)
	}
	sortRecords(recs, func(r jobs.Record) time.Time { return r.UpdatedAt })
	if *limit > 0 && len(recs) > *limit {
		recs = recs[:*limit]
	}
	if j.asJSON {
		return writeJobsJSON(stdout, recs)
	}
	if len(recs) == 0 {
		fmt.Fprintln(stderr, "jetretry jobs dead: no dead letters")
		return nil
	}
	return writeDeadTable(stdout, recs)
}

// deadQueues returns the queues that have dead letters in stream: the last
// token of each subject it holds (jetretry.dlq.<queue>).
func deadQueues(ctx context.Context, js jetstream.JetStream, stream string) ([]string, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return nil, err
	}
	var queues []string
	for subj := range info.State.Subjects {
		q := subj[strings.LastIndexByte(subj, '.')+1:]
		if jobsQueue.MatchString(q) && !slices.Contains(queues, q) {
			queues = append(queues, q)
		}
	}
	slices.Sort(queues)
	return queues, nil
}

// jobJSON is the JSON form of a job: the record as stored, with its times
// in UTC and its payload as raw JSON (a JSON string when it is not JSON).
type jobJSON struct {
	jobs.Record
	Payload json.RawMessage `json:"payload,omitempty"`
}

func toJobJSON(r jobs.Record) jobJSON {
	r = utcRecord(r)
	j := jobJSON{Record: r}
	if len(r.Payload) > 0 {
		j.Payload = json.RawMessage(r.Payload)
		if !json.Valid(r.Payload) {
			j.Payload, _ = json.Marshal(string(r.Payload))
		}
	}
	return j
}

// utcRecord returns r with its times in UTC; its history is copied.
func utcRecord(r jobs.Record) jobs.Record {
	r.CreatedAt, r.UpdatedAt, r.NextRetryAt = jobUTC(r.CreatedAt), jobUTC(r.UpdatedAt), jobUTC(r.NextRetryAt)
	if r.Run != nil {
		run := utcRun(*r.Run)
		r.Run = &run
	}
	h := make([]jobs.Run, len(r.History))
	for i, run := range r.History {
		h[i] = utcRun(run)
	}
	if r.History != nil {
		r.History = h
	}
	return r
}

func utcRun(r jobs.Run) jobs.Run {
	r.StartedAt, r.LeaseUntil, r.EndedAt = jobUTC(r.StartedAt), jobUTC(r.LeaseUntil), jobUTC(r.EndedAt)
	return r
}

// jobUTC is t in UTC; the zero time stays zero.
func jobUTC(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func writeJobJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func writeJobsJSON(w io.Writer, recs []jobs.Record) error {
	out := make([]jobJSON, 0, len(recs))
	for _, r := range recs {
		out = append(out, toJobJSON(r))
	}
	return writeJobJSON(w, out)
}

// jobTime formats a job's time for people: UTC, milliseconds, "-" when
// zero.
func jobTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return eventTime(t)
}

// terminalCell is a job's terminal designation for a table: its reason.
func terminalCell(r jobs.Record) string {
	switch {
	case !r.Terminal:
		return "-"
	case r.TerminalReason == "":
		return "yes"
	}
	return string(r.TerminalReason)
}

// writeJobsTable prints jobs as a table.
func writeJobsTable(w io.Writer, recs []jobs.Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tQUEUE\tSTATUS\tTERMINAL\tATTEMPTS\tBUDGET\tNEXT RETRY\tUPDATED\tLAST ERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", printable(r.Key, 200), r.Queue, r.Status, terminalCell(r),
			r.AttemptCount, r.BudgetUsed, jobTime(r.NextRetryAt), jobTime(r.UpdatedAt), cell(r.LastError))
	}
	return tw.Flush()
}

// writeDeadTable prints dead letters as a table.
func writeDeadTable(w io.Writer, recs []jobs.Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILED\tKEY\tQUEUE\tREASON\tATTEMPTS\tCLASS\tLAST ERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", jobTime(r.UpdatedAt), printable(r.Key, 200), r.Queue, terminalCell(r),
			r.AttemptCount, cell(string(r.ErrorClass)), cell(r.LastError))
	}
	return tw.Flush()
}

// writeJob prints one job for people, with its run history.
func writeJob(w io.Writer, r jobs.Record) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, value)
		}
	}
	row("key", printable(r.Key, 500))
	row("id", r.ID)
	row("queue", r.Queue)
	status := string(r.Status)
	if r.Reprocess {
		status += " (reprocessing a success)"
	}
	row("status", status)
	terminal := "no"
	if r.Terminal {
		terminal = "yes (" + terminalCell(r) + ")"
	}
	row("terminal", terminal)
	row("attempt_count", strconv.Itoa(r.AttemptCount))
	row("budget_used", strconv.Itoa(r.BudgetUsed))
	row("current_run_id", r.CurrentRunID)
	row("last_error", printable(r.LastError, 2000))
	row("error_class", string(r.ErrorClass))
	if !r.NextRetryAt.IsZero() {
		row("next_retry_at", jobTime(r.NextRetryAt))
	}
	if r.Run != nil {
		row("running", fmt.Sprintf("run %s (attempt %d) on %s since %s, lease until %s",
			r.Run.RunID, r.Run.Attempt, cell(r.Run.Owner), jobTime(r.Run.StartedAt), jobTime(r.Run.LeaseUntil)))
	}
	if r.Policy != nil {
		p := r.Policy
		row("policy", fmt.Sprintf("max %d attempts, %s initial delay ×%g, at most %s", p.MaxAttempts, p.BaseDelay, p.Multiplier, p.MaxDelay))
	}
	row("payload", printable(string(r.Payload), 500))
	row("created", jobTime(r.CreatedAt))
	row("updated", jobTime(r.UpdatedAt))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.History) == 0 {
		_, err := fmt.Fprintln(w, "\nno runs yet")
		return err
	}
	head := fmt.Sprintf("\nhistory (%d runs", len(r.History))
	if r.HistoryDropped > 0 {
		head += fmt.Sprintf(", %d older runs dropped", r.HistoryDropped)
	}
	fmt.Fprintln(w, head+"):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tATTEMPT\tSTARTED\tENDED\tOUTCOME\tERROR CLASS\tERROR")
	for _, run := range r.History {
		attempt := strconv.Itoa(run.Attempt)
		if run.Reprocess {
			attempt += " (reprocess)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", run.RunID, attempt, jobTime(run.StartedAt), jobTime(run.EndedAt),
			cell(string(run.Outcome)), cell(string(run.ErrorClass)), cell(run.Error))
	}
	return tw.Flush()
}
