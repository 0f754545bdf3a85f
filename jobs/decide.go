package jobs

import (
	"time"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/retry"
)

// This file holds the state machine as pure functions: each takes a
// record, what happened and the time, and returns the new record and the
// effects to carry out after the record's compare-and-set succeeds. The
// worker and the control plane only do I/O around them.

// effects are what a decision asks for once its record is written.
type effects struct {
	// schedule, when not zero, publishes the record's dispatch token on the
	// job's schedule subject, firing at that time.
	schedule time.Time
	// dlq publishes the record to the dead-letter stream.
	dlq bool
	// events are audit events without EventID (set when emitted).
	events []audit.Event
}

// verdict is what a worker does with a dispatch message.
type verdict uint8

const (
	// verdictAck: stale or finished; acknowledge and drop.
	verdictAck verdict = iota + 1
	// verdictRepair: the job waits for a retry whose schedule may have
	// been lost; publish it again, then acknowledge.
	verdictRepair
	// verdictWait: another worker holds a live lease; redeliver later.
	verdictWait
	// verdictClaim: write the new record, then run the job.
	verdictClaim
	// verdictFinish: write the new record (a crashed run exhausted the
	// budget), carry out the effects, acknowledge.
	verdictFinish
	// verdictRepairDLQ: the job failed terminally under this very dispatch
	// and the message came back, so its dead letter may not have been
	// published; publish it again (deduplicated by the DLQ stream), then
	// acknowledge.
	verdictRepairDLQ
)

// claimInput is what a worker brings to a claim.
type claimInput struct {
	now    time.Time
	lease  time.Duration
	runID  string
	owner  string
	policy retry.Policy
}

// dispatchDecision is decideDispatch's answer.
type dispatchDecision struct {
	verdict verdict
	wait    time.Duration // verdictWait
	rec     Record        // verdictClaim, verdictFinish
	fx      effects
}

// leaseSlack is added to a wait for another worker's lease, so the wait
// ends after the lease does.
const leaseSlack = 100 * time.Millisecond

// decideDispatch decides what to do with a dispatch message carrying token
// for the job rec.
func decideDispatch(rec Record, token string, in claimInput, cat string) dispatchDecision {
	if rec.Dispatch == "" || token != rec.Dispatch {
		if rec.Status == StatusPending && !rec.NextRetryAt.IsZero() && rec.Dispatch != "" {
			return dispatchDecision{verdict: verdictRepair}
		}
		return dispatchDecision{verdict: verdictAck}
	}
	switch rec.Status {
	case StatusFailed:
		if rec.Terminal && rec.TerminalReason != TerminalManual {
			return dispatchDecision{verdict: verdictRepairDLQ}
		}
		return dispatchDecision{verdict: verdictAck}
	case StatusSuccess:
		return dispatchDecision{verdict: verdictAck}
	case StatusRunning:
		if in.now.Before(rec.Run.LeaseUntil) {
			return dispatchDecision{verdict: verdictWait, wait: rec.Run.LeaseUntil.Sub(in.now) + leaseSlack}
		}
		// The run's worker stopped renewing its lease: it crashed.
		var fx effects
		rec, fx = crashRun(rec, in.now, in.policy, cat)
		if rec.Status != StatusRunning {
			return dispatchDecision{verdict: verdictFinish, rec: rec, fx: fx}
		}
		rec = claim(rec, in)
		return dispatchDecision{verdict: verdictClaim, rec: rec, fx: fx}
	}
	return dispatchDecision{verdict: verdictClaim, rec: claim(rec, in)}
}

// crashRun ends rec's current run as crashed. A crash is charged to the
// budget, so a job that kills its workers ends; when the budget is spent
// the job fails terminally. Otherwise rec stays running, for a claim.
func crashRun(rec Record, now time.Time, p retry.Policy, cat string) (Record, effects) {
	r := *rec.Run
	r.EndedAt, r.LeaseUntil = now, time.Time{}
	r.Outcome, r.ErrorClass = OutcomeCrashed, ClassCrashed
	r.Error, r.ErrorType = "lease expired: worker presumed crashed", "crashed"
	rec.addHistory(r)
	rec.Run = nil
	rec.LastError, rec.ErrorClass = r.Error, ClassCrashed
	rec.BudgetUsed++
	rec.UpdatedAt = now
	if rec.BudgetUsed >= p.MaxAttempts {
		return terminate(rec, r, TerminalMaxAttempts, now, p, cat)
	}
	ev := baseEvent(audit.TypeRetryAttempt, rec, r, cat, now)
	ev.AttemptNumber, ev.MaxAttempts = r.Attempt, p.MaxAttempts
	ev.ExceptionType, ev.ExceptionMessage = r.ErrorType, r.Error
	return rec, effects{events: []audit.Event{ev}}
}

// claim starts a run of rec.
func claim(rec Record, in claimInput) Record {
	rec.AttemptCount++
	rec.Status = StatusRunning
	rec.Run = &Run{
		RunID: in.runID, Owner: in.owner, Attempt: rec.AttemptCount, Reprocess: rec.Reprocess,
		StartedAt: in.now, LeaseUntil: in.now.Add(in.lease),
	}
	rec.UpdatedAt = in.now
	return rec
}

// renew extends the lease of run runID. It reports false when rec is no
// longer that run's: cancelled, finished or taken over.
func renew(rec Record, runID string, now time.Time, lease time.Duration) (Record, bool) {
	if rec.Status != StatusRunning || rec.Run == nil || rec.Run.RunID != runID {
		return rec, false
	}
	r := *rec.Run
	r.LeaseUntil = now.Add(lease)
	rec.Run = &r
	rec.UpdatedAt = now
	return rec, true
}

// ownsRun reports whether rec is still running run runID.
func ownsRun(rec Record, runID string) bool {
	return rec.Status == StatusRunning && rec.Run != nil && rec.Run.RunID == runID
}

// outcomeInput is what a worker brings to the end of a run.
type outcomeInput struct {
	err      error
	now      time.Time
	policy   retry.Policy
	maxAge   time.Duration
	rnd      float64 // uniform in [0, 1), for jitter
	newToken string  // the dispatch token of a scheduled retry
}

// decideOutcome ends rec's current run (which the caller owns) with
// in.err: success, a scheduled retry, or a terminal failure.
func decideOutcome(rec Record, in outcomeInput, cat string) (Record, effects) {
	r := *rec.Run
	r.EndedAt, r.LeaseUntil = in.now, time.Time{}
	rec.Run = nil
	rec.UpdatedAt = in.now
	rec.NextRetryAt = time.Time{}
	if in.err == nil {
		r.Outcome = OutcomeSuccess
		rec.addHistory(r)
		rec.Status, rec.CurrentRunID = StatusSuccess, r.RunID
		rec.Dispatch, rec.Reprocess = "", false
		rec.LastError, rec.ErrorClass = "", ""
		rec.Terminal, rec.TerminalReason = false, ""
		return rec, effects{}
	}
	p := in.policy
	class, hint := p.Classify(in.err)
	r.Outcome = OutcomeFailed
	r.Error, r.ErrorType = audit.TruncateMessage(in.err.Error()), retry.ErrorType(in.err)
	var delay time.Duration
	switch class {
	case retry.ClassPermanent:
		r.ErrorClass = ClassFinal
	case retry.ClassRateLimited:
		r.ErrorClass = ClassRateLimited
		delay = min(max(hint, 0), p.MaxDelay)
	default:
		r.ErrorClass = ClassRetryable
		rec.BudgetUsed++
	}
	rec.addHistory(r)
	rec.LastError, rec.ErrorClass = r.Error, r.ErrorClass
	switch {
	case class == retry.ClassPermanent:
		return terminate(rec, r, TerminalFinal, in.now, p, cat)
	case class == retry.ClassRetryable && rec.BudgetUsed >= p.MaxAttempts:
		return terminate(rec, r, TerminalMaxAttempts, in.now, p, cat)
	case class == retry.ClassRetryable:
		delay = p.Delay(rec.BudgetUsed, 0, in.rnd)
	}
	next := ceilSecond(in.now.Add(delay))
	if in.maxAge > 0 && next.Sub(rec.CreatedAt) > in.maxAge {
		return terminate(rec, r, TerminalMaxAge, in.now, p, cat)
	}
	rec.Status, rec.Dispatch, rec.NextRetryAt = StatusPending, in.newToken, next
	ev := baseEvent(audit.TypeRetryAttempt, rec, r, cat, in.now)
	ev.AttemptNumber, ev.MaxAttempts = r.Attempt, p.MaxAttempts
	ev.DelaySeconds = next.Sub(in.now).Seconds()
	ev.ExceptionType, ev.ExceptionMessage = r.ErrorType, r.Error
	return rec, effects{schedule: next, events: []audit.Event{ev}}
}

// terminate ends rec for good after run r. A failed reprocess leaves the
// earlier success current: the status goes back to success, and nothing
// goes to the dead letters.
func terminate(rec Record, r Run, why TerminalReason, now time.Time, p retry.Policy, cat string) (Record, effects) {
	// A failed job keeps the token of the dispatch it failed under: if
	// that message comes back (its dead letter could not be published, or
	// the worker died before acknowledging), decideDispatch republishes the
	// dead letter. No new dispatch can carry it.
	rec.Run, rec.NextRetryAt = nil, time.Time{}
	ev := baseEvent(audit.TypeRetryExhausted, rec, r, cat, now)
	ev.TotalAttempts = rec.AttemptCount
	ev.MaxAttempts = p.MaxAttempts
	ev.FinalExceptionType, ev.FinalExceptionMessage = r.ErrorType, r.Error
	ev.StopReason = string(why)
	if rec.Reprocess {
		rec.Dispatch = ""
		rec.Status, rec.Reprocess = StatusSuccess, false
		rec.Terminal, rec.TerminalReason = false, ""
		ev.AdditionalContext["reprocess"] = true
		return rec, effects{events: []audit.Event{ev}}
	}
	rec.Status, rec.Terminal, rec.TerminalReason = StatusFailed, true, why
	return rec, effects{dlq: true, events: []audit.Event{ev}}
}

// interrupt hands a run back when its worker shuts down: the run ends as
// cancelled and the job is pending again under the same dispatch token,
// so the message the worker gives back runs it again.
func interrupt(rec Record, now time.Time) Record {
	r := *rec.Run
	r.EndedAt, r.LeaseUntil = now, time.Time{}
	r.Outcome, r.ErrorClass, r.Error = OutcomeCancelled, ClassCancelled, "worker shut down"
	rec.addHistory(r)
	rec.Run, rec.Status, rec.UpdatedAt = nil, StatusPending, now
	return rec
}

// requeue is the control plane's failed → pending: a new dispatch token,
// the budget reset, the terminal designation cleared.
func requeue(rec Record, token string, now time.Time, cat string) (Record, effects, error) {
	if rec.Status != StatusFailed {
		return rec, effects{}, &TransitionError{Key: rec.Key, Op: "requeue", From: rec.Status, Terminal: rec.Terminal}
	}
	prev := rec.TerminalReason
	rec.Status, rec.Dispatch, rec.BudgetUsed = StatusPending, token, 0
	rec.Terminal, rec.TerminalReason = false, ""
	rec.NextRetryAt, rec.UpdatedAt = time.Time{}, now
	ev := overrideEvent(rec, "requeue", cat, now)
	ev.AdditionalContext["previous_terminal_reason"] = string(prev)
	return rec, effects{events: []audit.Event{ev}}, nil
}

// reprocess reruns a success; the success stays current unless the rerun
// succeeds.
func reprocess(rec Record, token string, now time.Time, cat string) (Record, effects, error) {
	if rec.Status != StatusSuccess {
		return rec, effects{}, &TransitionError{Key: rec.Key, Op: "reprocess", From: rec.Status, Terminal: rec.Terminal}
	}
	rec.Status, rec.Dispatch, rec.BudgetUsed, rec.Reprocess = StatusPending, token, 0, true
	rec.NextRetryAt, rec.UpdatedAt = time.Time{}, now
	return rec, effects{events: []audit.Event{overrideEvent(rec, "reprocess", cat, now)}}, nil
}

// cancel ends a pending or running job as failed and terminal (manual). A
// running run is recorded as cancelled; its worker notices at its next
// lease renewal. Cancelling a reprocess leaves the earlier success.
func cancel(rec Record, now time.Time, cat string) (Record, effects, error) {
	if rec.Status != StatusPending && rec.Status != StatusRunning {
		return rec, effects{}, &TransitionError{Key: rec.Key, Op: "cancel", From: rec.Status, Terminal: rec.Terminal}
	}
	if rec.Run != nil {
		r := *rec.Run
		r.EndedAt, r.LeaseUntil = now, time.Time{}
		r.Outcome, r.ErrorClass, r.Error = OutcomeCancelled, ClassCancelled, "cancelled by operator"
		rec.addHistory(r)
	}
	ev := overrideEvent(rec, "cancel", cat, now)
	rec.Run, rec.Dispatch, rec.NextRetryAt, rec.UpdatedAt = nil, "", time.Time{}, now
	if rec.Reprocess {
		rec.Dispatch = ""
		rec.Status, rec.Reprocess = StatusSuccess, false
		return rec, effects{events: []audit.Event{ev}}, nil
	}
	rec.Status, rec.Terminal, rec.TerminalReason = StatusFailed, true, TerminalManual
	rec.LastError, rec.ErrorClass = "cancelled by operator", ClassCancelled
	return rec, effects{events: []audit.Event{ev}}, nil
}

// ceilSecond rounds t up to a whole second: schedules fire at whole-second
// granularity.
func ceilSecond(t time.Time) time.Time {
	if tt := t.Truncate(time.Second); !tt.Equal(t) {
		return tt.Add(time.Second)
	}
	return t
}

// baseEvent is an audit event about run r of rec, without an EventID.
func baseEvent(typ audit.Type, rec Record, r Run, cat string, now time.Time) audit.Event {
	return audit.Event{
		Type: typ, Category: cat, Operation: "jobs." + rec.Queue,
		CorrelationID: rec.Key, Timestamp: now.UTC(), SchemaVersion: audit.SchemaVersion,
		AdditionalContext: map[string]any{
			"job_key": rec.Key, "job_id": rec.ID, "queue": rec.Queue, "run_id": r.RunID,
			"attempt_count": rec.AttemptCount, "budget_used": rec.BudgetUsed, "error_class": string(r.ErrorClass),
		},
	}
}

// overrideEvent is the audit event of a control-plane call.
func overrideEvent(rec Record, action string, cat string, now time.Time) audit.Event {
	return audit.Event{
		Type: audit.TypeManualOverride, Category: cat, Operation: "jobs." + rec.Queue,
		CorrelationID: rec.Key, Timestamp: now.UTC(), SchemaVersion: audit.SchemaVersion,
		AdditionalContext: map[string]any{
			"job_key": rec.Key, "job_id": rec.ID, "queue": rec.Queue, "override": action,
			"status": string(rec.Status), "attempt_count": rec.AttemptCount,
		},
	}
}
