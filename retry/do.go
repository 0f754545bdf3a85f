package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetretry/jetretry/audit"
)

// Do runs fn under the policy of category, retrying failures with backoff,
// and returns its result.
//
// Each attempt gets a context carrying its Attempt (see AttemptFrom): the
// 1-based number and a fresh span id. A failed attempt that will be retried
// emits a retry_attempt audit event; a call that fails emits
// retry_exhausted. Do never waits after the last attempt, and returns at
// once when ctx ends, even during a wait.
//
// On failure Do returns an *Error that wraps the last attempt's error and
// says why it stopped. Calls given an idempotency key (WithIdempotencyKey)
// may also return idempotency.ErrInProgress, ErrKeyReuse, ErrFailed,
// ErrUnavailable or ErrNotRecorded (the last one with a valid result: the
// operation ran). Bad options give an error wrapping ErrInvalidOption or
// ErrInvalidPolicy, and fn is not called.
//
// m must come from NewManager. Categories without a policy of their own get
// the manager's default policy.
func Do[T any](ctx context.Context, m *Manager, category Category, operation string, fn func(context.Context) (T, error), opts ...Option) (T, error) {
	var zero T
	if m == nil || m.clock == nil {
		return zero, fmt.Errorf("%w: manager must be created with NewManager", ErrInvalidOption)
	}
	if fn == nil {
		return zero, fmt.Errorf("%w: nil function", ErrInvalidOption)
	}
	if category == "" {
		return zero, fmt.Errorf("%w: empty category", ErrInvalidOption)
	}
	var c *call
	if len(opts) > 0 {
		var err error
		if c, err = newCall(opts); err != nil {
			return zero, err
		}
	}
	var r runner
	r.init(ctx, m, category, operation, c)
	var v T
	var err error
	if c != nil && c.key != "" {
		v, err = doIdempotent(&r, fn)
	} else {
		v, err = loop(&r, fn)
	}
	r.end(err)
	return v, err
}

// loop runs the attempts.
func loop[T any](r *runner, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := r.ctx.Err(); err != nil {
		return zero, r.stop(r.ctxReason(), nil, 0)
	}
	for {
		actx, cancel := r.next()
		v, err := fn(actx)
		if cancel != nil {
			cancel()
		}
		if err == nil {
			r.succeeded()
			return v, nil
		}
		delay, stop := r.failed(err)
		if stop != nil {
			return zero, stop
		}
		if stop := r.wait(delay); stop != nil {
			return zero, stop
		}
	}
}

// runner is the state of one Do call. It lives on the caller's stack.
type runner struct {
	m     *Manager
	ctx   context.Context // the call's context, with the span if tracing
	cat   Category
	op    string
	c     *call // nil when no options
	pol   *Policy
	tel   *telemetry
	span  trace.Span // nil when tracing is off
	start time.Time

	attempt int
	cur     *attemptCtx   // the current attempt, nil before the first
	prev    time.Duration // the last delay
	last    error         // the last attempt's error, marks stripped
}

func (r *runner) init(ctx context.Context, m *Manager, cat Category, op string, c *call) {
	r.m, r.ctx, r.cat, r.op, r.c = m, ctx, cat, op, c
	if c != nil && c.policy != nil {
		r.pol = c.policy
	} else {
		r.pol = m.policy(cat)
	}
	r.tel = m.telemetry()
	r.start = m.clock.Now()
	if r.tel.tracer != nil {
		r.ctx, r.span = r.tel.tracer.Start(ctx, string(cat),
			trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrCategory.String(string(cat)), attrOperation.String(op)))
	}
}

// next starts an attempt: its number, span id and context.
func (r *runner) next() (context.Context, context.CancelFunc) {
	r.attempt++
	a := &attemptCtx{Context: r.ctx, number: r.attempt, category: r.cat, operation: r.op}
	if r.c != nil {
		a.key = r.c.key
	}
	r.cur = a
	if r.pol.AttemptTimeout > 0 {
		return context.WithTimeout(a, r.pol.AttemptTimeout)
	}
	return a, nil
}

func (r *runner) succeeded() {
	r.tel.countAttempt(r.ctx, r.cat, "success")
	if r.span != nil {
		r.span.AddEvent("attempt", trace.WithAttributes(attrAttempt.Int(r.attempt), attrOutcome.String("success")))
	}
}

// failed classifies a failed attempt. It returns the wait before the next
// attempt, or the error that ends the call.
func (r *runner) failed(err error) (time.Duration, error) {
	r.last = stripMarks(err)
	if r.ctx.Err() != nil {
		return 0, r.stop(r.ctxReason(), r.last, 0)
	}
	class, hint := r.pol.Classify(err)
	switch {
	case class == ClassPermanent:
		return 0, r.stop(StopPermanent, r.last, 0)
	case r.c != nil && r.c.notIdempotent && r.c.key == "":
		return 0, r.stop(StopNotIdempotent, r.last, 0)
	case r.attempt >= r.pol.MaxAttempts:
		return 0, r.stop(StopExhausted, r.last, 0)
	}
	var delay, due time.Duration
	if class == ClassRateLimited {
		delay, due = r.pol.hintDelay(hint), hint
	} else {
		delay = r.pol.Delay(r.attempt, r.prev, float64From(r.m.rand.Uint64()))
		due = delay
	}
	// A wait (or a hint, even one longer than MaxDelay) that would end
	// past the time budget fails now, reporting when a retry is due.
	now := r.m.clock.Now()
	if r.pol.MaxElapsed > 0 && now.Sub(r.start)+due > r.pol.MaxElapsed {
		return 0, r.stop(StopElapsed, r.last, due)
	}
	if dl, ok := r.ctx.Deadline(); ok && due > time.Until(dl) {
		return 0, r.stop(StopDeadline, r.last, due)
	}
	r.prev = delay
	etype := ErrorType(r.last)
	if r.m.emitter != nil {
		e := r.event(audit.TypeRetryAttempt, now)
		e.AttemptNumber = r.attempt
		e.MaxAttempts = r.pol.MaxAttempts
		e.DelaySeconds = delay.Seconds()
		e.ExceptionType = etype
		e.ExceptionMessage = audit.TruncateMessage(r.last.Error())
		r.emit(e)
	}
	r.tel.countAttempt(r.ctx, r.cat, "retry")
	r.tel.recordDelay(r.ctx, r.cat, delay.Seconds())
	if r.span != nil {
		r.span.AddEvent("attempt", trace.WithAttributes(
			attrAttempt.Int(r.attempt), attrOutcome.String("retry"),
			attrErrorType.String(etype), attrDelay.Float64(delay.Seconds())))
	}
	return delay, nil
}

// wait sleeps for d on the manager's clock, or until the context ends.
func (r *runner) wait(d time.Duration) error {
	if d <= 0 {
		if r.ctx.Err() != nil {
			return r.stop(r.ctxReason(), r.last, 0)
		}
		return nil
	}
	t := r.m.clock.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-r.ctx.Done():
		t.Stop()
		return r.stop(r.ctxReason(), r.last, 0)
	}
}

// ctxReason maps the ended context to a stop reason.
func (r *runner) ctxReason() StopReason {
	cause := context.Cause(r.ctx)
	switch {
	case errors.Is(cause, errLeaseLost):
		return StopLeaseLost
	case errors.Is(r.ctx.Err(), context.DeadlineExceeded):
		return StopDeadline
	}
	return StopCanceled
}

// stop ends the call with a failure: it builds the *Error, and emits the
// retry_exhausted event when at least one attempt ran.
func (r *runner) stop(reason StopReason, cause error, retryAfter time.Duration) error {
	now := r.m.clock.Now()
	e := &Error{
		Category: r.cat, Operation: r.op, Attempts: r.attempt, Elapsed: now.Sub(r.start),
		Reason: reason, RetryAfter: retryAfter, Cause: cause,
	}
	if reason == StopCanceled || reason == StopDeadline || reason == StopLeaseLost {
		// Nil when Do stopped early because the next wait would pass
		// the deadline.
		e.ctxErr = context.Cause(r.ctx)
	}
	if r.attempt == 0 {
		return e
	}
	if r.m.emitter != nil {
		ev := r.event(audit.TypeRetryExhausted, now)
		ev.TotalAttempts = r.attempt
		ev.FinalExceptionType = ErrorType(cause)
		if cause != nil {
			ev.FinalExceptionMessage = audit.TruncateMessage(cause.Error())
		}
		ev.StopReason = reason.String()
		r.emit(ev)
	}
	r.tel.countAttempt(r.ctx, r.cat, "failure")
	r.tel.countExhausted(r.ctx, r.cat, reason)
	if r.span != nil {
		r.span.AddEvent("attempt", trace.WithAttributes(
			attrAttempt.Int(r.attempt), attrOutcome.String("failure"),
			attrErrorType.String(ErrorType(cause)), attrReason.String(reason.String())))
	}
	return e
}

// end closes the call's span.
func (r *runner) end(err error) {
	if r.span == nil {
		return
	}
	r.span.SetAttributes(attrAttempts.Int(r.attempt))
	if err != nil {
		var re *Error
		if errors.As(err, &re) {
			r.span.SetAttributes(attrReason.String(re.Reason.String()), attrErrorType.String(ErrorType(re.Cause)))
		} else {
			r.span.SetAttributes(attrErrorType.String(ErrorType(err)))
		}
		r.span.SetStatus(codes.Error, err.Error())
	}
	r.span.End()
}

// event returns an audit event of type t with the call's common fields.
func (r *runner) event(t audit.Type, now time.Time) audit.Event {
	var span SpanID
	if r.cur != nil {
		span = r.cur.spanID()
	} else {
		span = newSpanID() // an event before any attempt, such as a hit
	}
	e := audit.Event{
		Type:          t,
		Category:      string(r.cat),
		Operation:     r.op,
		SpanID:        span.String(),
		Timestamp:     now.UTC(),
		EventID:       audit.NewEventID(),
		SchemaVersion: audit.SchemaVersion,
	}
	if r.c != nil {
		e.TenantID, e.CorrelationID, e.TraceID = r.c.tenant, r.c.correlation, r.c.traceID
		if len(r.c.context) > 0 {
			e.AdditionalContext = r.c.context
		}
	}
	if e.TraceID == "" {
		if sc := trace.SpanContextFromContext(r.ctx); sc.HasTraceID() {
			e.TraceID = sc.TraceID().String()
		}
	}
	return e
}

// emit hands e to the emitter. An event the emitter refuses is logged: an
// audit failure never fails the call.
func (r *runner) emit(e audit.Event) {
	if err := r.m.emitter.Emit(context.WithoutCancel(r.ctx), e); err != nil {
		r.m.logger.Error("jetretry: audit event not accepted",
			"event_type", e.Type, "retry_category", e.Category, "operation", e.Operation,
			"event_id", e.EventID, "error", err)
	}
}
