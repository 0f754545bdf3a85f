package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/retry"
)

// Defaults of Config.
const (
	DefaultBucket    = "JETRETRY_JOBS"
	DefaultStream    = "JETRETRY_JOBS_WORK"
	DefaultDLQStream = "JETRETRY_JOBS_DLQ"
	// DefaultCategory is the retry_category of the audit events of jobs:
	// durable jobs are seed 003's reprocessing.
	DefaultCategory = "REPLAY_REPLAY_PROCESSING"
)

// Subject prefixes. Dispatch messages go to jetretry.jobs.<queue>.run,
// each job's retry schedule to jetretry.jobs.<queue>.sched.<id>, and dead
// letters to jetretry.dlq.<queue>.
const (
	workPrefix = "jetretry.jobs."
	dlqPrefix  = "jetretry.dlq."
)

func runSubject(queue string) string       { return workPrefix + queue + ".run" }
func schedSubject(queue, id string) string { return workPrefix + queue + ".sched." + id }

// RunSubject is the subject a queue's dispatch messages (fresh jobs and
// due retries alike) are published on and its workers consume.
func RunSubject(queue string) string { return runSubject(queue) }

// ScheduleSubject is the subject that holds the pending retry of job key
// in queue: a one-shot message schedule targeting RunSubject(queue). The
// server keeps one schedule per subject.
func ScheduleSubject(queue, key string) string { return schedSubject(queue, ID(key)) }
func dlqSubject(queue string) string           { return dlqPrefix + queue }

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// Config configures a Client. The zero value is valid. Replicas and
// Storage apply only when the bucket and streams are created.
type Config struct {
	// Bucket is the KV bucket of job records. Default DefaultBucket.
	Bucket string
	// Stream is the work-queue stream of dispatch and schedule messages.
	// Default DefaultStream.
	Stream string
	// DLQStream is the dead-letter stream. Default DefaultDLQStream.
	DLQStream string
	// Replicas of the bucket and streams, 1 to 5. Default 1; 3 on a
	// cluster.
	Replicas int
	// Storage of the bucket and streams. Default file storage.
	Storage jetstream.StorageType
	// Audit receives retry_attempt, retry_exhausted and manual_override
	// events. Default nil: no audit.
	Audit audit.Emitter
	// Category is the retry_category of audit events. Default
	// DefaultCategory.
	Category string
	// Now is the clock. Default time.Now. Its times are recorded in UTC.
	// Processes sharing jobs need clocks that agree to well within a
	// lease.
	Now func() time.Time
	// Rand returns uniform numbers in [0, 1) for jitter. Default
	// math/rand/v2's Float64.
	Rand func() float64
	// Logger logs what cannot be returned. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.DLQStream == "" {
		c.DLQStream = DefaultDLQStream
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Category == "" {
		c.Category = DefaultCategory
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	// Records hold UTC times, whatever the machine's zone.
	now := c.Now
	c.Now = func() time.Time { return now().UTC() }
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	for _, n := range []string{c.Bucket, c.Stream, c.DLQStream} {
		if !validName.MatchString(n) {
			return c, fmt.Errorf("%w: name %q: use letters, digits, '-' and '_'", ErrInvalidConfig, n)
		}
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return c, fmt.Errorf("%w: replicas must be 1 to 5, got %d", ErrInvalidConfig, c.Replicas)
	}
	return c, nil
}

// Client submits jobs and is the control plane: it reads, lists,
// requeues, reprocesses and cancels them. Workers run on a Client too.
// A Client is safe for concurrent use. Build it with New.
type Client struct {
	js   jetstream.JetStream
	kv   jetstream.KeyValue
	cfg  Config
	work jetstream.Stream
	fast *fastPath // nil: every call goes through nats.go's KeyValue
	// leader reads the bucket's stream leader; nil on a single replica.
	leader *leaderRead
}

// New returns a Client, creating the bucket and streams if missing
// (existing ones are used as they are). It returns an error wrapping
// ErrInvalidConfig for a nil js or a bad config, and ErrUnavailable when
// JetStream cannot be reached.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Client, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: nil JetStream", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: cfg.Bucket, Description: "jetretry durable job records",
		Replicas: cfg.Replicas, Storage: cfg.Storage,
	})
	if errors.Is(err, jetstream.ErrBucketExists) {
		kv, err = js.KeyValue(ctx, cfg.Bucket)
	}
	if err != nil {
		return nil, opErr(ctx, "open bucket", cfg.Bucket, err)
	}
	work, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: cfg.Stream, Description: "jetretry job dispatch and retry schedules",
		Subjects:  []string{workPrefix + "*.run", workPrefix + "*.sched.*"},
		Retention: jetstream.WorkQueuePolicy, AllowMsgSchedules: true,
		Replicas: cfg.Replicas, Storage: cfg.Storage,
	})
	if err != nil {
		return nil, err
	}
	if _, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: cfg.DLQStream, Description: "jetretry dead-letter jobs",
		Subjects:  []string{dlqPrefix + "*"},
		Retention: jetstream.LimitsPolicy, Replicas: cfg.Replicas, Storage: cfg.Storage,
		Duplicates: 2 * time.Minute,
	}); err != nil {
		return nil, err
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, opErr(ctx, "open bucket", cfg.Bucket, err)
	}
	// The bucket's stream decides the fast path and the leader reads. A
	// KeyValue that does not tell (a wrapper) gets neither fast path nor
	// direct-get assumptions: the configured replicas decide.
	sc := jetstream.StreamConfig{Name: "KV_" + cfg.Bucket, Replicas: cfg.Replicas}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
		sc = bs.StreamInfo().Config
	}
	return &Client{
		js: js, kv: kv, cfg: cfg, work: work,
		fast: newFastPath(js, kv, sc), leader: newLeaderRead(js, kv, sc),
	}, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	s, err := js.CreateStream(ctx, sc)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		s, err = js.Stream(ctx, sc.Name)
	}
	if err != nil {
		return nil, opErr(ctx, "open stream", sc.Name, err)
	}
	return s, nil
}

// SubmitOptions are optional settings of Submit.
type SubmitOptions struct {
	// Policy overrides the worker's retry policy for this job. It must be
	// valid. Its matchers are not stored.
	Policy *retry.Policy
}

// Submit creates the job key in queue with payload, and dispatches it to
// the queue's workers. It is idempotent by key: when a job with the key
// exists (in any queue, in any status) it returns that job and false, and
// creates nothing; if that job is pending and not waiting for a retry, it
// is dispatched again (extra dispatches are harmless), so submitting again
// after an error never strands a job. It returns ErrInvalidConfig for a
// bad queue, key or policy, and ErrUnavailable when JetStream fails; after
// such an error the job may or may not exist: submit again to know.
func (c *Client) Submit(ctx context.Context, queue, key string, payload []byte, opts SubmitOptions) (Record, bool, error) {
	spec, err := c.spec(queue, key, payload, opts)
	if err != nil {
		return Record{}, false, err
	}
	token := uuid.NewString()
	rec := newRecord(key, token, spec)
	b, err := rec.encode()
	if err != nil {
		return Record{}, false, err
	}
	// The dispatch carries the job and a worker that gets it before the
	// record creates the record itself, so the two writes go out at once:
	// one round trip. No read first: a new key (the common case) costs two
	// writes, and a duplicate finds the record when its create conflicts;
	// its dispatch is then stale, and the worker that gets it drops it.
	wait, err := c.sendDispatch(ctx, queue, key, token, &spec)
	if err != nil {
		return Record{}, false, err
	}
	existing, cerr := c.create(ctx, rec.ID, b)
	if err := wait(); err != nil {
		if cerr == nil && existing == nil {
			return Record{}, false, fmt.Errorf("%w (job %q is pending without a dispatch; submit it again)", err, key)
		}
		return Record{}, false, err
	}
	if cerr != nil {
		// The dispatch is stored: the job runs, its worker writes the record.
		return Record{}, false, cerr
	}
	if existing == nil {
		return rec, true, nil
	}
	got := *existing
	if got.Dispatch == token {
		// A worker got our dispatch first and wrote the record from it.
		return got, true, nil
	}
	if got.Status == StatusPending && got.NextRetryAt.IsZero() && got.Dispatch != "" {
		if err := c.publishDispatch(ctx, got.Queue, got.Key, got.Dispatch, nil); err != nil {
			return got, false, err
		}
	}
	return got, false, nil
}

// spec checks Submit's arguments and returns the job they describe.
func (c *Client) spec(queue, key string, payload []byte, opts SubmitOptions) (jobSpec, error) {
	if err := checkQueue(queue); err != nil {
		return jobSpec{}, err
	}
	if key == "" {
		return jobSpec{}, fmt.Errorf("%w: empty job key", ErrInvalidConfig)
	}
	if opts.Policy != nil {
		if err := opts.Policy.Validate(); err != nil {
			return jobSpec{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		p := *opts.Policy
		p.Retryable, p.NonRetryable = nil, nil
		opts.Policy = &p
	}
	return jobSpec{Queue: queue, Payload: payload, Policy: opts.Policy, CreatedAt: c.cfg.Now()}, nil
}

// create writes a new record b under id, in one round trip (a write that
// expects no earlier revision). When a record exists it returns it
// instead; a deleted record's marker is written over.
func (c *Client) create(ctx context.Context, id string, b []byte) (*Record, error) {
	_, err := c.kvUpdate(ctx, id, b, 0)
	if err == nil {
		return nil, nil
	}
	if !isConflict(err) {
		return nil, opErr(ctx, "create", id, err)
	}
	got, _, err := c.get(ctx, id)
	if !errors.Is(err, ErrNotFound) {
		if err != nil {
			return nil, err
		}
		return &got, nil
	}
	if _, err = c.kv.Create(ctx, id, b); isConflict(err) {
		// Created meanwhile.
		got, _, err := c.get(ctx, id)
		if err != nil {
			return nil, err
		}
		return &got, nil
	}
	if err != nil {
		return nil, opErr(ctx, "create", id, err)
	}
	return nil, nil
}

func (c *Client) publishDispatch(ctx context.Context, queue, key, token string, job *jobSpec) error {
	wait, err := c.sendDispatch(ctx, queue, key, token, job)
	if err != nil {
		return err
	}
	return wait()
}

// sendDispatch sends a dispatch and returns a function that waits for its
// acknowledgement, so that a caller can make another call meanwhile.
func (c *Client) sendDispatch(ctx context.Context, queue, key, token string, job *jobSpec) (func() error, error) {
	b, err := json.Marshal(dispatchMsg{Key: key, Token: token, Job: job})
	if err != nil {
		return nil, err
	}
	if c.fast == nil {
		done := make(chan error, 1)
		go func() {
			_, err := c.js.Publish(ctx, runSubject(queue), b)
			done <- err
		}()
		return func() error {
			if err := <-done; err != nil {
				return opErr(ctx, "dispatch", key, err)
			}
			return nil
		}, nil
	}
	call, err := c.fast.req.Send(&nats.Msg{Subject: runSubject(queue), Data: b})
	if err != nil {
		return nil, opErr(ctx, "dispatch", key, err)
	}
	return func() error {
		if _, err := c.fast.ack(ctx, call); err != nil {
			return opErr(ctx, "dispatch", key, err)
		}
		return nil
	}, nil
}

// publishSchedule (re)publishes rec's retry schedule: its dispatch token,
// delivered to the run subject at rec.NextRetryAt. A job has one schedule
// subject, so publishing again replaces the earlier schedule.
func (c *Client) publishSchedule(ctx context.Context, rec Record) error {
	b, _ := json.Marshal(dispatchMsg{Key: rec.Key, Token: rec.Dispatch})
	_, err := c.js.Publish(ctx, schedSubject(rec.Queue, rec.ID), b,
		jetstream.WithScheduleAt(rec.NextRetryAt), jetstream.WithScheduleTarget(runSubject(rec.Queue)))
	if err != nil {
		return opErr(ctx, "schedule", rec.Key, err)
	}
	return nil
}

// publishDLQ copies rec to the dead letters, deduplicated by job and
// attempt.
func (c *Client) publishDLQ(ctx context.Context, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = c.js.Publish(ctx, dlqSubject(rec.Queue), b, jetstream.WithMsgID(fmt.Sprintf("%s:%d", rec.ID, rec.AttemptCount)))
	if err != nil {
		return opErr(ctx, "dead-letter", rec.Key, err)
	}
	return nil
}

// emit sends audit events; failures are logged, never returned: the job's
// state is already written.
func (c *Client) emit(ctx context.Context, evs []audit.Event) {
	if c.cfg.Audit == nil {
		return
	}
	for _, e := range evs {
		e.EventID = audit.NewEventID()
		if err := c.cfg.Audit.Emit(ctx, e); err != nil {
			c.cfg.Logger.Warn("jobs: audit event not accepted", "event_type", e.Type, "error", err)
		}
	}
}

// carryOut performs the effects of a written record.
func (c *Client) carryOut(ctx context.Context, rec Record, fx effects) error {
	var errs []error
	if fx.dlq {
		errs = append(errs, c.publishDLQ(ctx, rec))
	}
	if !fx.schedule.IsZero() {
		errs = append(errs, c.publishSchedule(ctx, rec))
	}
	c.emit(ctx, fx.events)
	return errors.Join(errs...)
}

func (c *Client) get(ctx context.Context, id string) (Record, uint64, error) {
	b, rev, err := c.kvGet(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Record{}, 0, fmt.Errorf("%w: id %s", ErrNotFound, id)
	}
	if err != nil {
		return Record{}, 0, opErr(ctx, "get", id, err)
	}
	rec, err := decodeRecord(id, rev, b)
	return rec, rev, err
}

// kvGet reads id's record: its value and revision.
func (c *Client) kvGet(ctx context.Context, id string) ([]byte, uint64, error) {
	if c.fast != nil {
		return c.fast.get(ctx, id)
	}
	e, err := c.kv.Get(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	return e.Value(), e.Revision(), nil
}

// kvUpdate writes b as id's record over revision rev (0: none).
func (c *Client) kvUpdate(ctx context.Context, id string, b []byte, rev uint64) (uint64, error) {
	if c.fast != nil {
		return c.fast.update(ctx, id, b, rev)
	}
	return c.kv.Update(ctx, id, b, rev)
}

// update writes rec over revision rev. The bool reports a conflict.
func (c *Client) update(ctx context.Context, rec Record, rev uint64) (uint64, bool, error) {
	b, err := rec.encode()
	if err != nil {
		return 0, false, err
	}
	n, err := c.kvUpdate(ctx, rec.ID, b, rev)
	if err != nil {
		if isConflict(err) {
			return 0, true, nil
		}
		return 0, false, opErr(ctx, "update", rec.Key, err)
	}
	return n, false, nil
}

// Get returns the job key with its run history. It returns ErrNotFound,
// ErrCorrupt, or ErrUnavailable.
func (c *Client) Get(ctx context.Context, key string) (Record, error) {
	rec, _, err := c.get(ctx, ID(key))
	return rec, err
}

// Filter selects jobs for List. Zero fields match every job.
type Filter struct {
	Queue  string
	Status Status
	// Terminal, when not nil, keeps only jobs whose Terminal equals it.
	Terminal *bool
	// Limit bounds the records read; default 10000.
	Limit int
}

// List returns the jobs matching f, in no particular order. It reads the
// bucket's current records in one pass (a watch of its last values), at
// most f.Limit of them. It returns ErrUnavailable when JetStream fails.
func (c *Client) List(ctx context.Context, f Filter) ([]Record, error) {
	if f.Limit <= 0 {
		f.Limit = 10000
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	watch, err := c.kv.WatchAll(wctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, opErr(ctx, "list", c.cfg.Bucket, err)
	}
	defer func() { _ = watch.Stop() }()
	var out []Record
	for n := 0; n < f.Limit; n++ {
		var e jetstream.KeyValueEntry
		select {
		case e = <-watch.Updates():
		case <-ctx.Done():
			return out, opErr(ctx, "list", c.cfg.Bucket, ctx.Err())
		}
		if e == nil {
			break // the last current record was delivered
		}
		rec, err := decodeRecord(e.Key(), e.Revision(), e.Value())
		if err != nil {
			return out, err
		}
		if (f.Queue == "" || rec.Queue == f.Queue) && (f.Status == "" || rec.Status == f.Status) &&
			(f.Terminal == nil || rec.Terminal == *f.Terminal) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// maxControlRounds bounds the read-decide-write rounds of a control-plane
// call that keeps losing races.
const maxControlRounds = 8

// control runs a control-plane transition with compare-and-set.
func (c *Client) control(ctx context.Context, key string, decide func(Record, time.Time) (Record, effects, error), dispatch bool, opts []OverrideOption) (Record, error) {
	var o override
	for _, opt := range opts {
		opt(&o)
	}
	id := ID(key)
	for range maxControlRounds {
		rec, rev, err := c.get(ctx, id)
		if err != nil {
			return Record{}, err
		}
		next, fx, err := decide(rec, c.cfg.Now())
		if err != nil {
			return rec, err
		}
		_, conflict, err := c.update(ctx, next, rev)
		if err != nil {
			return Record{}, err
		}
		if conflict {
			continue
		}
		c.emit(ctx, o.annotate(fx.events))
		if dispatch {
			if err := c.publishDispatch(ctx, next.Queue, next.Key, next.Dispatch, nil); err != nil {
				return next, fmt.Errorf("jobs: job %q is pending but its dispatch failed; Kick it: %w", key, err)
			}
		}
		return next, nil
	}
	return Record{}, fmt.Errorf("%w: job %q", ErrConflict, key)
}

// An OverrideOption adds to the manual_override audit event of Requeue,
// Reprocess and Cancel.
type OverrideOption func(*override)

type override struct{ reason, operator string }

// WithReason records why the override was made, as "reason" in the
// event's additional_context.
func WithReason(text string) OverrideOption { return func(o *override) { o.reason = text } }

// WithOperator records who made the override, as "operator" in the
// event's additional_context.
func WithOperator(name string) OverrideOption { return func(o *override) { o.operator = name } }

// annotate adds o's reason and operator to the manual_override events.
func (o override) annotate(evs []audit.Event) []audit.Event {
	if o.reason == "" && o.operator == "" {
		return evs
	}
	for i, e := range evs {
		if e.Type != audit.TypeManualOverride {
			continue
		}
		ac := maps.Clone(e.AdditionalContext)
		if ac == nil {
			ac = map[string]any{}
		}
		if o.reason != "" {
			ac["reason"] = o.reason
		}
		if o.operator != "" {
			ac["operator"] = o.operator
		}
		evs[i].AdditionalContext = ac
	}
	return evs
}

// Requeue moves a failed job back to pending, with its retry budget reset
// and its terminal designation cleared, and dispatches it. It is the only
// way out of failed, and it is audited as a manual_override event. Its
// attempt_count keeps counting. It returns a *TransitionError
// (ErrInvalidTransition) for a job that has not failed, ErrNotFound,
// ErrConflict and ErrUnavailable.
func (c *Client) Requeue(ctx context.Context, key string, opts ...OverrideOption) (Record, error) {
	token := uuid.NewString()
	return c.control(ctx, key, func(r Record, now time.Time) (Record, effects, error) {
		return requeue(r, token, now, c.cfg.Category)
	}, true, opts)
}

// Reprocess reruns a successful job. If the rerun succeeds its run becomes
// current; if it fails (for good), the earlier success stays current and
// the status goes back to success. Audited as a manual_override event. It
// returns ErrInvalidTransition for a job that has not succeeded,
// ErrNotFound, ErrConflict and ErrUnavailable.
func (c *Client) Reprocess(ctx context.Context, key string, opts ...OverrideOption) (Record, error) {
	token := uuid.NewString()
	return c.control(ctx, key, func(r Record, now time.Time) (Record, effects, error) {
		return reprocess(r, token, now, c.cfg.Category)
	}, true, opts)
}

// Cancel ends a pending or running job as failed and terminal (reason
// manual); a running handler's context is cancelled at its next lease
// renewal, and its outcome is discarded. Cancelling a reprocess leaves the
// earlier success. Audited as a manual_override event. It returns
// ErrInvalidTransition for a finished job, ErrNotFound, ErrConflict and
// ErrUnavailable.
func (c *Client) Cancel(ctx context.Context, key string, opts ...OverrideOption) (Record, error) {
	return c.control(ctx, key, func(r Record, now time.Time) (Record, effects, error) {
		return cancel(r, now, c.cfg.Category)
	}, false, opts)
}

// Kick dispatches a pending job again under its current token: it repairs
// a Requeue or Reprocess whose dispatch failed. Extra dispatches are
// harmless. It returns ErrInvalidTransition for a job that is not pending.
func (c *Client) Kick(ctx context.Context, key string) error {
	rec, err := c.Get(ctx, key)
	if err != nil {
		return err
	}
	if rec.Status != StatusPending || rec.Dispatch == "" {
		return &TransitionError{Key: key, Op: "kick", From: rec.Status, Terminal: rec.Terminal}
	}
	return c.publishDispatch(ctx, rec.Queue, rec.Key, rec.Dispatch, nil)
}

// DeadLetters returns the records in queue's dead letters, oldest first,
// at most limit (default 1000 when limit <= 0). Each is the job as it
// failed, with its history. It returns ErrUnavailable when JetStream fails.
func (c *Client) DeadLetters(ctx context.Context, queue string, limit int) ([]Record, error) {
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 1000
	}
	subj := dlqSubject(queue)
	st, err := c.js.Stream(ctx, c.cfg.DLQStream)
	if err != nil {
		return nil, opErr(ctx, "dead letters", queue, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		return nil, opErr(ctx, "dead letters", queue, err)
	}
	n := min(int(info.State.Subjects[subj]), limit)
	if n == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		return nil, opErr(ctx, "dead letters", queue, err)
	}
	out := make([]Record, 0, n)
	for len(out) < n {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, opErr(ctx, "dead letters", queue, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var r Record
			if err := json.Unmarshal(m.Data(), &r); err != nil {
				c.cfg.Logger.Warn("jobs: undecodable dead letter", "queue", queue, "error", err)
				continue
			}
			out = append(out, r)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, errFetchTimeout) {
			return out, opErr(ctx, "dead letters", queue, err)
		}
		if got == 0 {
			break
		}
	}
	return out, nil
}
