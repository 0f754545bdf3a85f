package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/retry"
)

// Job is what a handler sees of the job it runs.
type Job struct {
	ID      string
	Queue   string
	Key     string
	Payload []byte
	// RunID is this run's UUIDv7.
	RunID string
	// Attempt is the job's attempt_count including this run.
	Attempt int
	// Reprocess is set when this run reprocesses a success.
	Reprocess bool
}

type jobKey struct{}

// JobFrom returns the job a handler's context carries.
func JobFrom(ctx context.Context) (*Job, bool) {
	j, ok := ctx.Value(jobKey{}).(*Job)
	return j, ok
}

// Handler runs a job. A nil error is a success. Mark errors with
// retry.Permanent (final, not retried) or retry.RateLimited (retried after
// the hint without using the budget); others are classified by the
// worker's policy. The context is cancelled when the job's lease is lost
// (cancelled by an operator, or taken over) or the worker shuts down;
// handlers should return soon after.
type Handler func(ctx context.Context, job *Job) error

// DefaultPolicy returns seed 004's job retry policy: 8 attempts, 60 s
// initial delay, 3600 s maximum, ×2, ±10% jitter.
func DefaultPolicy() retry.Policy {
	return retry.Policy{MaxAttempts: 8, BaseDelay: time.Minute, MaxDelay: time.Hour, Multiplier: 2, JitterFactor: 0.1}
}

// WorkerConfig configures a Worker. The zero value is valid.
type WorkerConfig struct {
	// Concurrency is the number of jobs run at once. Default 1.
	Concurrency int
	// Prefetch is how many jobs a worker claims ahead of a free slot, so
	// that a slot never waits for the server: claimers read and claim
	// jobs while the slots run handlers. A job claimed ahead is running
	// in its record from its claim (Run.StartedAt) and its lease is kept
	// while it waits for a slot, so no other worker takes it: with slow
	// handlers and several workers, a small prefetch spreads jobs more
	// evenly. A worker that dies leaves a crashed run (charged to the
	// budget) on every job it had claimed, started or not. Up to
	// Concurrency+Prefetch more dispatch messages wait unclaimed in the
	// consumer's buffer, without renewing anything: if one waits longer
	// than Lease, the server hands it to another worker, and the job's
	// record decides which copy runs it. Default 2×Concurrency; -1 for
	// none (each slot claims its next job when it is free).
	Prefetch int
	// Lease is how long a run holds a job without renewing; it is renewed
	// every Lease/3, and it is the consumer's AckWait. A crashed worker's
	// job runs again after about a lease. Default 30s; at least 1s.
	Lease time.Duration
	// Policy is the queue's retry policy, unless a job overrides it.
	// Default DefaultPolicy(). Its matchers classify every job's errors.
	Policy *retry.Policy
	// MaxAge ends a job that would retry later than MaxAge after it was
	// created (terminal reason max_age). Default 0: no limit.
	MaxAge time.Duration
	// Owner names this worker in run records. Default host:pid:random.
	Owner string
	// MissingDeliveries is how many times a dispatch that does not carry
	// its job (a retry's, a requeue's) is delivered while the job has no
	// record before it is dropped. Fresh jobs' dispatches carry the job,
	// and a worker writes a missing record from them, unless the key holds
	// a delete marker (the job was deleted, or is being submitted again
	// over the marker): then it too waits for the record this many times.
	// Default 8.
	MissingDeliveries int
	// MissingDelay is the first wait between those deliveries; it doubles
	// each time, up to 30s. Default 500ms: with 8 deliveries a record has
	// about a minute to appear, so a slow Create under load never strands
	// its job.
	MissingDelay time.Duration
	// SweepEvery, when positive, makes the worker sweep its queue that
	// often (Client.Sweep with Grace = Lease, at times jittered by ±10%):
	// pending jobs whose dispatch was lost are dispatched again. A sweep
	// reads every record of the bucket, so keep it to minutes on large
	// buckets. Default 0: never.
	SweepEvery time.Duration
	// OnOutcome, when set, is called after a run's outcome is written and
	// its effects (schedule, dead letter, audit) are carried out, with the
	// record as written: status success, pending (a retry is scheduled)
	// or failed. It is not called for runs handed back or lost. It runs on
	// the worker's goroutine before the dispatch is acknowledged; keep it
	// short. Use it for metrics and tests.
	OnOutcome func(Record)
}

func (c WorkerConfig) withDefaults() (WorkerConfig, error) {
	if c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	switch c.Prefetch {
	case 0:
		c.Prefetch = 2 * c.Concurrency
	case -1:
		c.Prefetch = 0
	}
	if c.Policy == nil {
		p := DefaultPolicy()
		c.Policy = &p
	}
	if c.Owner == "" {
		h, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s:%d:%s", h, os.Getpid(), uuid.NewString()[:8])
	}
	if c.MissingDeliveries == 0 {
		c.MissingDeliveries = 8
	}
	if c.MissingDelay == 0 {
		c.MissingDelay = 500 * time.Millisecond
	}
	switch {
	case c.Concurrency < 1:
		return c, fmt.Errorf("%w: concurrency must be at least 1, got %d", ErrInvalidConfig, c.Concurrency)
	case c.Prefetch < 0:
		return c, fmt.Errorf("%w: prefetch must be -1 or more, got %d", ErrInvalidConfig, c.Prefetch)
	case c.Lease < time.Second:
		return c, fmt.Errorf("%w: lease must be at least 1s, got %v", ErrInvalidConfig, c.Lease)
	case c.MaxAge < 0:
		return c, fmt.Errorf("%w: negative max age %v", ErrInvalidConfig, c.MaxAge)
	case c.SweepEvery < 0:
		return c, fmt.Errorf("%w: negative sweep interval %v", ErrInvalidConfig, c.SweepEvery)
	case c.MissingDeliveries < 1 || c.MissingDelay < 0:
		return c, fmt.Errorf("%w: bad missing-record redelivery settings", ErrInvalidConfig)
	}
	if err := c.Policy.Validate(); err != nil {
		return c, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// Worker runs the jobs of one queue. Any number of workers, in any number
// of processes, may serve a queue: they share a durable consumer, and a
// job's record decides, by compare-and-set, who runs it. Build it with
// NewWorker and start it with Run.
type Worker struct {
	c     *Client
	queue string
	h     Handler
	cfg   WorkerConfig
	// Outcomes are written off the handler's goroutine, so that a slot
	// takes its next job while the last one's outcome is written; slots
	// bounds those writes to Concurrency, and ends waits for them.
	slots chan struct{}
	ends  sync.WaitGroup
}

// NewWorker returns a worker for queue on c. It returns ErrInvalidConfig
// for a bad queue, a nil handler or a bad config.
func NewWorker(c *Client, queue string, h Handler, cfg WorkerConfig) (*Worker, error) {
	if c == nil || h == nil {
		return nil, fmt.Errorf("%w: nil client or handler", ErrInvalidConfig)
	}
	if err := checkQueue(queue); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Worker{c: c, queue: queue, h: h, cfg: cfg, slots: make(chan struct{}, cfg.Concurrency)}, nil
}

// ConsumerName is the durable consumer the workers of queue share.
func ConsumerName(queue string) string { return "jobs_" + queue }

// Run runs jobs until ctx is done, then hands back the runs in progress
// (each is recorded as cancelled and runs again elsewhere) and returns
// nil. It returns ErrUnavailable when the consumer cannot be set up.
func (w *Worker) Run(ctx context.Context) error {
	cons, err := w.c.work.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: ConsumerName(w.queue), FilterSubject: runSubject(w.queue),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: w.cfg.Lease, MaxDeliver: -1,
		MaxAckPending: 10000,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return opErr(ctx, "consumer", w.queue, err)
	}
	// Short pull expiry and heartbeat: a pull request the server lost
	// (seen under load: the iterator then waits out its expiry while
	// jobs queue) is noticed within seconds, not the default 30 s.
	it, err := cons.Messages(jetstream.PullMaxMessages(w.cfg.Concurrency+w.cfg.Prefetch), jetstream.PullExpiry(5*time.Second), jetstream.PullHeartbeat(time.Second))
	if err != nil {
		return opErr(ctx, "consume", w.queue, err)
	}
	// Messages go through claimers, which decode each dispatch, read its
	// job's record and claim the job, to the slots, which run the
	// handlers. A slot thus takes its next job without a round trip, and
	// a job claimed ahead keeps its lease (and its message) alive while it
	// waits for a slot. With no prefetch, slots claim for themselves.
	msgs := make(chan jetstream.Msg)
	ready := make(chan *running)
	var claimers, wg sync.WaitGroup
	for range w.cfg.Prefetch {
		claimers.Go(func() {
			for m := range msgs {
				r := w.claimFor(ctx, m)
				if r == nil {
					continue
				}
				select {
				case ready <- r:
				case <-ctx.Done():
					w.exec(ctx, r) // hands the run back
				}
			}
		})
	}
	for range w.cfg.Concurrency {
		wg.Go(func() {
			if w.cfg.Prefetch == 0 {
				for m := range msgs {
					if r := w.claimFor(ctx, m); r != nil {
						w.exec(ctx, r)
					}
				}
				return
			}
			for r := range ready {
				w.exec(ctx, r)
			}
		})
	}
	sweepCtx, stopSweep := context.WithCancel(ctx)
	var sweeper sync.WaitGroup
	if w.cfg.SweepEvery > 0 {
		sweeper.Go(func() { w.sweepLoop(sweepCtx) })
	}
	// On shutdown, messages fetched ahead are handed back at once rather
	// than left to their ack wait.
	stop := context.AfterFunc(ctx, it.Drain)
	defer stop()
	defer it.Stop()
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				break
			}
			if ctx.Err() != nil {
				it.Stop()
				break
			}
			w.c.cfg.Logger.Debug("jobs: consume", "queue", w.queue, "error", err)
			continue
		}
		if ctx.Err() != nil {
			_ = m.Nak()
			continue
		}
		select {
		case msgs <- m:
		case <-ctx.Done():
			_ = m.Nak()
		}
	}
	stopSweep()
	sweeper.Wait()
	close(msgs)
	claimers.Wait()
	close(ready)
	wg.Wait()
	w.ends.Wait()
	return nil
}

// sweepLoop sweeps the worker's queue every SweepEvery until ctx is done.
func (w *Worker) sweepLoop(ctx context.Context) {
	for {
		d := time.Duration(float64(w.cfg.SweepEvery) * (0.9 + 0.2*w.c.cfg.Rand()))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		found, err := w.c.Sweep(ctx, SweepOptions{Queue: w.queue, Grace: w.cfg.Lease})
		for _, r := range found {
			w.c.cfg.Logger.Warn("jobs: stranded job dispatched again", "queue", w.queue, "key", r.Key)
		}
		if err != nil && ctx.Err() == nil {
			w.c.cfg.Logger.Warn("jobs: sweep", "queue", w.queue, "error", err)
		}
	}
}

// maxMissingDelay caps the backoff of a dispatch whose record is missing.
const maxMissingDelay = 30 * time.Second

// opTimeout bounds each JetStream call of the worker.
const opTimeout = 5 * time.Second

// claimFor decides about one dispatch message and claims its job if it
// may run here: it returns the run, started, or nil when the message was
// dealt with (acknowledged, handed back, dropped).
func (w *Worker) claimFor(ctx context.Context, m jetstream.Msg) *running {
	var d dispatchMsg
	if err := json.Unmarshal(m.Data(), &d); err != nil || d.Key == "" {
		w.c.cfg.Logger.Warn("jobs: dropping undecodable dispatch", "queue", w.queue, "error", err)
		_ = m.Term()
		return nil
	}
	id := ID(d.Key)
	runID := mustV7()
	createConflicted := false // writing the record from the dispatch conflicted
	fromLeader := false       // read the record from the bucket's leader
	for range maxControlRounds {
		if ctx.Err() != nil {
			_ = m.Nak()
			return nil
		}
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		var (
			rec Record
			rev uint64
			err error
		)
		if fromLeader {
			rec, rev, err = w.c.getFromLeader(octx, id)
		} else {
			rec, rev, err = w.c.get(octx, id)
		}
		cancel()
		switch {
		case errors.Is(err, ErrNotFound) && d.Job != nil && d.Job.Queue == w.queue && !createConflicted:
			// The submit's record is not written yet (or its write
			// failed): write it from the dispatch, claiming it at once.
			rec, rev, err = newRecord(d.Key, d.Token, *d.Job), 0, nil
		case errors.Is(err, ErrNotFound):
			// A dispatch without its job (a retry's, a requeue's) for a
			// missing record, or a fresh job's whose write conflicted
			// with a delete marker: an operator deleted the job, or it
			// is being submitted again over the marker and the submit's
			// own write is about to land. Redelivered a few times, then
			// dropped: a deleted job's dispatch does not bring it back.
			md, merr := m.Metadata()
			if merr == nil && int(md.NumDelivered) >= w.cfg.MissingDeliveries {
				w.c.cfg.Logger.Warn("jobs: dispatch of a missing job dropped", "key", d.Key)
				_ = m.Term()
				return nil
			}
			delay := w.cfg.MissingDelay
			if merr == nil {
				for n := uint64(1); n < md.NumDelivered && delay < maxMissingDelay; n++ {
					delay *= 2
				}
			}
			_ = m.NakWithDelay(min(delay, maxMissingDelay))
			return nil
		case errors.Is(err, ErrCorrupt):
			w.c.cfg.Logger.Error("jobs: corrupt job record; dispatch dropped", "key", d.Key, "error", err)
			_ = m.Term()
			return nil
		case err != nil:
			_ = m.NakWithDelay(time.Second)
			return nil
		}
		if ownsRun(rec, runID) {
			// Our claim landed although its write reported an error.
			return w.start(ctx, m, rec, rev)
		}
		pol := w.policy(rec)
		dec := decideDispatch(rec, d.Token, claimInput{
			now: w.c.cfg.Now(), lease: w.cfg.Lease, runID: runID, owner: w.cfg.Owner, policy: pol,
		}, w.c.cfg.Category)
		writesNothing := dec.verdict == verdictAck || dec.verdict == verdictRepair || dec.verdict == verdictRepairDLQ
		if writesNothing && d.Token != rec.Dispatch && w.c.leader != nil && !fromLeader {
			// The dispatch looks stale, and what follows writes no
			// record: make sure the read was not a lagging replica's.
			fromLeader = true
			continue
		}
		switch dec.verdict {
		case verdictAck:
			_ = m.Ack()
			return nil
		case verdictWait:
			_ = m.NakWithDelay(dec.wait)
			return nil
		case verdictRepair, verdictRepairDLQ:
			octx, cancel := context.WithTimeout(ctx, opTimeout)
			var err error
			if dec.verdict == verdictRepair {
				err = w.c.publishSchedule(octx, rec)
			} else {
				err = w.c.publishDLQ(octx, rec)
			}
			cancel()
			if err != nil {
				_ = m.NakWithDelay(time.Second)
				return nil
			}
			_ = m.Ack()
			return nil
		}
		octx, cancel = context.WithTimeout(ctx, opTimeout)
		nrev, conflict, err := w.c.update(octx, dec.rec, rev)
		cancel()
		if conflict {
			createConflicted = createConflicted || rev == 0
			continue
		}
		if err != nil {
			continue // it may have landed: read again
		}
		octx, cancel = context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		ferr := w.c.carryOut(octx, dec.rec, dec.fx)
		cancel()
		if dec.verdict == verdictFinish {
			if ferr != nil {
				w.c.cfg.Logger.Warn("jobs: terminal effects failed", "key", d.Key, "error", ferr)
			}
			_ = m.Ack()
			return nil
		}
		return w.start(ctx, m, dec.rec, nrev)
	}
	_ = m.NakWithDelay(time.Second)
	return nil
}

// policy is the policy for rec: its override, with the worker's matchers.
func (w *Worker) policy(rec Record) retry.Policy {
	if rec.Policy == nil {
		return *w.cfg.Policy
	}
	p := *rec.Policy
	p.Retryable, p.NonRetryable = w.cfg.Policy.Retryable, w.cfg.Policy.NonRetryable
	return p
}

var errLeaseLost = errors.New("jobs: lease lost")

// running is a claimed run: its job, the handler's context, and the
// record as last written by the run's lease keeper.
type running struct {
	m       jetstream.Msg
	job     *Job
	hctx    context.Context
	hcancel context.CancelCauseFunc
	mu      sync.Mutex // guards cur and rev between the lease keeper and the run
	cur     Record
	rev     uint64
	hbStop  chan struct{}
	hbDone  chan struct{}
}

// start starts the run of the claimed job rec (at revision rev): its lease
// keeper renews the lease from now on, until exec ends the run.
func (w *Worker) start(ctx context.Context, m jetstream.Msg, rec Record, rev uint64) *running {
	job := &Job{
		ID: rec.ID, Queue: rec.Queue, Key: rec.Key, Payload: rec.Payload,
		RunID: rec.Run.RunID, Attempt: rec.AttemptCount, Reprocess: rec.Reprocess,
	}
	hctx, hcancel := context.WithCancelCause(context.WithValue(ctx, jobKey{}, job))
	r := &running{
		m: m, job: job, hctx: hctx, hcancel: hcancel, cur: rec, rev: rev,
		hbStop: make(chan struct{}), hbDone: make(chan struct{}),
	}
	go w.keepLease(r)
	return r
}

// keepLease renews r's lease every Lease/3 until the run ends, and ends
// the run (cancels its context) when the lease is lost.
func (w *Worker) keepLease(r *running) {
	defer close(r.hbDone)
	t := time.NewTicker(w.cfg.Lease / 3)
	defer t.Stop()
	// The fence: a run whose lease could not be renewed in time (the
	// server unreachable) ends when the lease does, before another
	// worker may take the job over, so the key never runs twice at
	// once. A margin covers clocks that disagree a little.
	r.mu.Lock()
	fence := time.NewTimer(w.leaseLeft(r.cur))
	r.mu.Unlock()
	defer fence.Stop()
	for {
		select {
		case <-r.hbStop:
			return
		case <-r.hctx.Done():
			return
		case <-fence.C:
			r.mu.Lock()
			left := w.leaseLeft(r.cur)
			r.mu.Unlock()
			if left <= 0 {
				r.hcancel(errLeaseLost)
				return
			}
			fence.Reset(left)
			continue
		case <-t.C:
		}
		_ = r.m.InProgress()
		r.mu.Lock()
		lost := w.renew(r.hctx, &r.cur, &r.rev)
		r.mu.Unlock()
		if lost {
			r.hcancel(errLeaseLost)
			return
		}
	}
}

// exec runs r's handler, unless the run already ended (lease lost, or the
// worker is shutting down), and records its outcome.
func (w *Worker) exec(ctx context.Context, r *running) {
	defer r.hcancel(nil)
	var herr error
	// The worker's context first: when it ends, its runs' contexts end one
	// after another, and a slot freed by the first must not start the
	// next whose context has not ended yet.
	if ctx.Err() == nil && r.hctx.Err() == nil {
		herr = w.safeCall(r.hctx, r.job)
	}
	close(r.hbStop)
	<-r.hbDone
	r.mu.Lock()
	cur, rev, m, runID := r.cur, r.rev, r.m, r.job.RunID
	r.mu.Unlock()

	bg := context.WithoutCancel(ctx)
	switch {
	case errors.Is(context.Cause(r.hctx), errLeaseLost):
		_ = m.Nak() // the job was cancelled or taken over; let the record decide
		return
	case ctx.Err() != nil:
		// Shutting down: hand the run back.
		w.write(bg, m, cur, rev, runID, nil, func(r Record) (Record, effects) { return interrupt(r, w.c.cfg.Now()), effects{} })
		_ = m.Nak()
		return
	}
	token := uuid.NewString()
	pol := w.policy(cur)
	now := w.c.cfg.Now()
	end := func() {
		done := w.write(bg, m, cur, rev, runID, w.cfg.OnOutcome, func(r Record) (Record, effects) {
			return decideOutcome(r, outcomeInput{
				err: herr, now: now, policy: pol, maxAge: w.cfg.MaxAge,
				rnd: w.c.cfg.Rand(), newToken: token,
			}, w.c.cfg.Category)
		})
		if done {
			_ = m.Ack()
		} else {
			_ = m.NakWithDelay(w.cfg.MissingDelay)
		}
	}
	// The lease still holds the job while its outcome is written, so the
	// slot moves on at once; at most Concurrency outcomes are in flight.
	w.slots <- struct{}{}
	w.ends.Go(func() {
		defer func() { <-w.slots }()
		end()
	})
}

// safeCall runs the handler, turning a panic into a retryable error.
func (w *Worker) safeCall(ctx context.Context, job *Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("jobs: handler panic: %v", p)
		}
	}()
	return w.h(ctx, job)
}

// renew extends the lease of cur; it reports true when the lease is lost.
// An unreachable server is not a loss: the final write decides.
func (w *Worker) renew(ctx context.Context, cur *Record, rev *uint64) bool {
	runID := cur.Run.RunID
	next, ok := renew(*cur, runID, w.c.cfg.Now(), w.cfg.Lease)
	if !ok {
		return true
	}
	// A renewal may not outlast the lease it renews: the fence must be
	// able to end the run in time.
	octx, cancel := context.WithTimeout(ctx, min(opTimeout, max(w.leaseLeft(*cur), time.Millisecond)))
	defer cancel()
	n, conflict, err := w.c.update(octx, next, *rev)
	if err != nil {
		return false
	}
	if !conflict {
		*cur, *rev = next, n
		return false
	}
	// Someone wrote: perhaps our own earlier renewal that reported an
	// error but landed.
	r, nrev, err := w.c.get(octx, cur.ID)
	if err != nil {
		return !errors.Is(err, ErrUnavailable)
	}
	if !ownsRun(r, runID) {
		return true
	}
	*cur, *rev = r, nrev
	return false
}

// leaseLeft is how long the run of cur may still go on: until its lease
// ends, less a tenth of the lease for clocks that disagree.
func (w *Worker) leaseLeft(cur Record) time.Duration {
	if cur.Run == nil {
		return 0
	}
	return cur.Run.LeaseUntil.Add(-w.cfg.Lease / 10).Sub(w.c.cfg.Now())
}

// write ends run runID with decide's record, retrying while JetStream is
// unavailable (a server restart), and carries out its effects. It reports
// whether the outcome is recorded (by this write or an earlier attempt of
// it) and its effects are carried out; false when the run is no longer
// ours or an effect failed, so that the dispatch is redelivered.
// When the outcome is recorded, written (if not nil) gets the record.
func (w *Worker) write(ctx context.Context, m jetstream.Msg, cur Record, rev uint64, runID string, written func(Record), decide func(Record) (Record, effects)) bool {
	next, fx := decide(cur)
	deadline := time.Now().Add(2 * w.cfg.Lease)
	for attempt := 0; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, opTimeout)
		_, conflict, err := w.c.update(octx, next, rev)
		if err == nil && !conflict {
			ferr := w.c.carryOut(octx, next, fx)
			cancel()
			if ferr != nil {
				// Not acknowledged: the redelivered dispatch is stale
				// and republishes a lost schedule (verdictRepair).
				w.c.cfg.Logger.Warn("jobs: effects failed after the record was written", "key", cur.Key, "error", ferr)
				return false
			}
			if written != nil {
				written(next)
			}
			return true
		}
		// Conflict, or unknown: read the record to see who wrote.
		r, nrev, gerr := w.c.get(octx, cur.ID)
		cancel()
		if gerr == nil {
			if landed(r, runID) {
				// An earlier write of ours landed; effects may be missing
				// (a schedule is repaired by the stale dispatch's redelivery).
				ctx2, cancel2 := context.WithTimeout(ctx, opTimeout)
				ferr := w.c.carryOut(ctx2, r, fx)
				cancel2()
				if ferr == nil && written != nil {
					written(r)
				}
				return ferr == nil
			}
			if !ownsRun(r, runID) {
				return false
			}
			rev = nrev
			next, fx = decide(r)
			continue
		}
		if time.Now().After(deadline) {
			return false
		}
		_ = m.InProgress()
		select {
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 2*time.Second)):
		case <-ctx.Done():
			return false
		}
	}
}

// landed reports whether rec already holds the end of run runID, written
// by its worker (not a crash or cancel recorded by someone else).
func landed(rec Record, runID string) bool {
	for i := len(rec.History) - 1; i >= 0; i-- {
		r := rec.History[i]
		if r.RunID == runID {
			return r.Outcome == OutcomeSuccess || r.Outcome == OutcomeFailed || (r.Outcome == OutcomeCancelled && r.Error == "worker shut down")
		}
	}
	return false
}

func mustV7() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
