package jobs

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/retry"
)

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 500_000_000, time.UTC)

func testPolicy() retry.Policy {
	return retry.Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 10 * time.Second, Multiplier: 2, Jitter: retry.JitterNone}
}

func pendingRec() Record {
	return Record{ID: ID("k"), Queue: "q", Key: "k", Status: StatusPending, Dispatch: "D", CreatedAt: t0, UpdatedAt: t0}
}

func claimed(t *testing.T, rec Record, runID string, now time.Time) Record {
	t.Helper()
	d := decideDispatch(rec, rec.Dispatch, claimInput{now: now, lease: 10 * time.Second, runID: runID, owner: "w", policy: testPolicy()}, "C")
	require.Equal(t, verdictClaim, d.verdict)
	return d.rec
}

func TestDecideDispatch(t *testing.T) {
	in := claimInput{now: t0, lease: 10 * time.Second, runID: "R1", owner: "w", policy: testPolicy()}
	running := claimed(t, pendingRec(), "R0", t0.Add(-5*time.Second))
	sched := pendingRec()
	sched.NextRetryAt = t0.Add(time.Minute)
	done := pendingRec()
	done.Status = StatusSuccess
	dead := pendingRec()
	dead.Status, dead.Terminal, dead.TerminalReason = StatusFailed, true, TerminalFinal
	cancelled := pendingRec()
	cancelled.Status, cancelled.Terminal, cancelled.TerminalReason, cancelled.Dispatch = StatusFailed, true, TerminalManual, ""
	tests := []struct {
		name  string
		rec   Record
		token string
		now   time.Time
		want  verdict
	}{
		{"pending claims", pendingRec(), "D", t0, verdictClaim},
		{"early fire claims", sched, "D", t0, verdictClaim},
		{"stale token", pendingRec(), "X", t0, verdictAck},
		{"stale token repairs schedule", sched, "X", t0, verdictRepair},
		{"finished", done, "D", t0, verdictAck},
		{"failed under this dispatch republishes its dead letter", dead, "D", t0, verdictRepairDLQ},
		{"stray dispatch of a dead job", dead, "X", t0, verdictAck},
		{"cancelled", cancelled, "D", t0, verdictAck},
		{"live lease waits", running, "D", t0, verdictWait},
		{"expired lease takes over", running, "D", t0.Add(6 * time.Second), verdictClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in.now = tt.now
			got := decideDispatch(tt.rec, tt.token, in, "C")
			require.Equal(t, tt.want, got.verdict)
		})
	}
	t.Run("wait until lease end", func(t *testing.T) {
		in.now = t0
		got := decideDispatch(running, "D", in, "C")
		require.Equal(t, 5*time.Second+leaseSlack, got.wait)
	})
}

func TestDecideCrashTakeover(t *testing.T) {
	running := claimed(t, pendingRec(), "R0", t0)
	now := t0.Add(11 * time.Second)
	d := decideDispatch(running, "D", claimInput{now: now, lease: 10 * time.Second, runID: "R1", owner: "w2", policy: testPolicy()}, "C")
	require.Equal(t, verdictClaim, d.verdict)
	got := d.rec
	require.Equal(t, 2, got.AttemptCount)
	require.Equal(t, 1, got.BudgetUsed)
	require.Equal(t, "R1", got.Run.RunID)
	require.Len(t, got.History, 1)
	require.Equal(t, OutcomeCrashed, got.History[0].Outcome)
	require.Equal(t, "R0", got.History[0].RunID)
	require.Len(t, d.fx.events, 1)
	require.Equal(t, audit.TypeRetryAttempt, d.fx.events[0].Type)
	require.Equal(t, "crashed", d.fx.events[0].ExceptionType)

	// A crash that spends the budget ends the job.
	p := testPolicy()
	p.MaxAttempts = 1
	d = decideDispatch(running, "D", claimInput{now: now, lease: 10 * time.Second, runID: "R1", policy: p}, "C")
	require.Equal(t, verdictFinish, d.verdict)
	require.Equal(t, StatusFailed, d.rec.Status)
	require.Equal(t, TerminalMaxAttempts, d.rec.TerminalReason)
	require.True(t, d.fx.dlq)
}

func TestDecideOutcome(t *testing.T) {
	p := testPolicy()
	tests := []struct {
		name       string
		budget     int
		reprocess  bool
		err        error
		maxAge     time.Duration
		wantStatus Status
		wantBudget int
		wantNext   time.Time
		wantReason TerminalReason
		wantDLQ    bool
		wantEvent  audit.Type
	}{
		{name: "success", wantStatus: StatusSuccess},
		{name: "retryable", err: errors.New("x"), wantStatus: StatusPending, wantBudget: 1,
			wantNext: time.Date(2026, 11, 20, 10, 0, 2, 0, time.UTC), wantEvent: audit.TypeRetryAttempt},
		{name: "second retryable doubles", budget: 1, err: errors.New("x"), wantStatus: StatusPending, wantBudget: 2,
			wantNext: time.Date(2026, 11, 20, 10, 0, 3, 0, time.UTC), wantEvent: audit.TypeRetryAttempt},
		{name: "exhausted", budget: 2, err: errors.New("x"), wantStatus: StatusFailed, wantBudget: 3,
			wantReason: TerminalMaxAttempts, wantDLQ: true, wantEvent: audit.TypeRetryExhausted},
		{name: "final", err: retry.Permanent(errors.New("x")), wantStatus: StatusFailed,
			wantReason: TerminalFinal, wantDLQ: true, wantEvent: audit.TypeRetryExhausted},
		{name: "rate limited keeps budget", budget: 2, err: retry.RateLimited(errors.New("x"), 3*time.Second),
			wantStatus: StatusPending, wantBudget: 2, wantNext: time.Date(2026, 11, 20, 10, 0, 4, 0, time.UTC), wantEvent: audit.TypeRetryAttempt},
		{name: "rate limit hint clamped", err: retry.RateLimited(errors.New("x"), time.Hour),
			wantStatus: StatusPending, wantNext: time.Date(2026, 11, 20, 10, 0, 11, 0, time.UTC), wantEvent: audit.TypeRetryAttempt},
		{name: "max age", err: errors.New("x"), maxAge: time.Second, wantStatus: StatusFailed, wantBudget: 1,
			wantReason: TerminalMaxAge, wantDLQ: true, wantEvent: audit.TypeRetryExhausted},
		{name: "failed reprocess keeps success", reprocess: true, err: retry.Permanent(errors.New("x")),
			wantStatus: StatusSuccess, wantEvent: audit.TypeRetryExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := pendingRec()
			rec.BudgetUsed, rec.Reprocess, rec.CurrentRunID = tt.budget, tt.reprocess, ""
			if tt.reprocess {
				rec.CurrentRunID = "OLD"
			}
			rec = claimed(t, rec, "R1", t0)
			got, fx := decideOutcome(rec, outcomeInput{err: tt.err, now: t0, policy: p, maxAge: tt.maxAge, newToken: "D2"}, "C")
			require.Equal(t, tt.wantStatus, got.Status)
			require.Equal(t, tt.wantBudget, got.BudgetUsed)
			require.Equal(t, 1, got.AttemptCount)
			require.Equal(t, tt.wantNext, got.NextRetryAt)
			require.Equal(t, tt.wantNext, fx.schedule)
			require.Equal(t, tt.wantReason, got.TerminalReason)
			require.Equal(t, tt.wantReason != "", got.Terminal)
			require.Equal(t, tt.wantDLQ, fx.dlq)
			if tt.wantDLQ {
				require.Equal(t, "D", got.Dispatch, "a dead job keeps the token it failed under")
				require.Equal(t, verdictRepairDLQ, decideDispatch(got, "D", claimInput{now: t0}, "C").verdict)
			}
			require.Nil(t, got.Run)
			require.Len(t, got.History, 1)
			if tt.wantEvent == "" {
				require.Empty(t, fx.events)
			} else {
				require.Len(t, fx.events, 1)
				require.Equal(t, tt.wantEvent, fx.events[0].Type)
				require.NoError(t, func() error { e := fx.events[0]; e.EventID = "x"; return e.Validate() }())
			}
			switch {
			case tt.wantStatus == StatusPending:
				require.Equal(t, "D2", got.Dispatch)
			case tt.reprocess:
				require.Equal(t, "OLD", got.CurrentRunID)
			case tt.wantStatus == StatusSuccess:
				require.Equal(t, "R1", got.CurrentRunID)
			}
		})
	}
}

func TestControlTransitions(t *testing.T) {
	failed := pendingRec()
	failed.Status, failed.Terminal, failed.TerminalReason, failed.BudgetUsed, failed.AttemptCount = StatusFailed, true, TerminalFinal, 3, 3
	success := pendingRec()
	success.Status, success.CurrentRunID = StatusSuccess, "R"

	got, fx, err := requeue(failed, "D9", t0, "C")
	require.NoError(t, err)
	require.Equal(t, StatusPending, got.Status)
	require.Equal(t, 0, got.BudgetUsed)
	require.Equal(t, 3, got.AttemptCount)
	require.False(t, got.Terminal)
	require.Equal(t, "D9", got.Dispatch)
	require.Equal(t, audit.TypeManualOverride, fx.events[0].Type)

	for _, rec := range []Record{pendingRec(), success} {
		_, _, err := requeue(rec, "D9", t0, "C")
		require.ErrorIs(t, err, ErrInvalidTransition)
	}
	_, _, err = reprocess(failed, "D9", t0, "C")
	require.ErrorIs(t, err, ErrInvalidTransition)
	got, _, err = reprocess(success, "D9", t0, "C")
	require.NoError(t, err)
	require.True(t, got.Reprocess)
	require.Equal(t, "R", got.CurrentRunID)

	running := claimed(t, pendingRec(), "R1", t0)
	got, _, err = cancel(running, t0, "C")
	require.NoError(t, err)
	require.Equal(t, StatusFailed, got.Status)
	require.Equal(t, TerminalManual, got.TerminalReason)
	require.Equal(t, OutcomeCancelled, got.History[0].Outcome)
	_, ok := renew(got, "R1", t0, time.Second)
	require.False(t, ok, "a cancelled run cannot renew")
	_, _, err = cancel(success, t0, "C")
	require.ErrorIs(t, err, ErrInvalidTransition)
}

func TestRecordRoundTripAndHistoryBound(t *testing.T) {
	rec := claimed(t, pendingRec(), "R1", t0)
	rec.Payload = []byte(`{"a":1}`)
	p := testPolicy()
	rec.Policy = &p
	for i := range MaxHistory + 5 {
		rec.addHistory(Run{RunID: fmt.Sprint(i), StartedAt: t0})
	}
	require.Len(t, rec.History, MaxHistory)
	require.Equal(t, 5, rec.HistoryDropped)
	require.Equal(t, "5", rec.History[0].RunID)
	b, err := rec.encode()
	require.NoError(t, err)
	got, err := decodeRecord(rec.ID, 1, b)
	require.NoError(t, err)
	require.Equal(t, rec, got)

	for name, bad := range map[string]string{
		"not json":        `{`,
		"unknown version": `{"version":9,"id":"` + rec.ID + `","queue":"q","key":"k","status":"pending"}`,
		"wrong id":        `{"version":1,"id":"other","queue":"q","key":"k","status":"pending"}`,
		"bad status":      `{"version":1,"id":"` + rec.ID + `","queue":"q","key":"k","status":"weird"}`,
		"running, no run": `{"version":1,"id":"` + rec.ID + `","queue":"q","key":"k","status":"running"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeRecord(rec.ID, 7, []byte(bad))
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func TestCeilSecondAndID(t *testing.T) {
	require.Equal(t, time.Date(2026, 11, 20, 10, 0, 1, 0, time.UTC), ceilSecond(t0))
	whole := time.Date(2026, 11, 20, 10, 0, 1, 0, time.UTC)
	require.Equal(t, whole, ceilSecond(whole))
	require.Len(t, ID("source/customer/query/2026-11-20"), 32)
	require.NotEqual(t, ID("a"), ID("b"))
}
