package audit_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
)

// call builds the events one call emits: a retry_attempt per failed
// attempt that was retried, and a retry_exhausted when the call failed.
// failures is the number of failed attempts; the call succeeded when
// failures < attempts.
func call(cat, span string, attempts, failures int) []audit.Event {
	var out []audit.Event
	for n := 1; n <= failures && n < attempts; n++ {
		out = append(out, audit.Event{Type: audit.TypeRetryAttempt, Category: cat, AttemptNumber: n, MaxAttempts: attempts, SpanID: span + string(rune('0'+n))})
	}
	if failures >= attempts {
		out = append(out, audit.Event{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: attempts, SpanID: span + "x"})
	}
	return out
}

func concat(parts ...[]audit.Event) []audit.Event {
	var out []audit.Event
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestComputeStats(t *testing.T) {
	const cat = "RETRY_KV_GET"
	tests := []struct {
		name   string
		events []audit.Event
		want   audit.CategoryStats
	}{
		{"no events", nil, audit.CategoryStats{}},
		{
			"one call succeeds at attempt 2",
			call(cat, "a", 3, 1),
			audit.CategoryStats{Attempts: 1, RetriedCalls: 1, CallsWithFailures: 1, SuccessRate: 1, AvgAttempts: 2},
		},
		{
			"one call exhausted after 3",
			call(cat, "a", 3, 3),
			audit.CategoryStats{Attempts: 2, Exhaustions: 1, RetriedCalls: 1, FailedCalls: 1, CallsWithFailures: 1, AvgAttempts: 3},
		},
		{
			"permanent failure at attempt 1",
			[]audit.Event{{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 1}},
			audit.CategoryStats{Exhaustions: 1, FailedCalls: 1, CallsWithFailures: 1, AvgAttempts: 1},
		},
		{
			"mix: 2 recover, 1 exhausted, 1 permanent",
			concat(call(cat, "a", 3, 1), call(cat, "b", 3, 2), call(cat, "c", 3, 3),
				[]audit.Event{{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 1}}),
			// attempts: a 2, b 3, c 3, d 1 = 9 over 4 calls.
			audit.CategoryStats{Attempts: 5, Exhaustions: 2, RetriedCalls: 3, FailedCalls: 2, CallsWithFailures: 4, SuccessRate: 0.5, AvgAttempts: 2.25},
		},
		{
			"stopped while waiting after attempt 1 counts once",
			[]audit.Event{
				{Type: audit.TypeRetryAttempt, Category: cat, AttemptNumber: 1, SpanID: "s1"},
				{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 1, SpanID: "s1", StopReason: "canceled"},
			},
			audit.CategoryStats{Attempts: 1, Exhaustions: 1, RetriedCalls: 1, FailedCalls: 1, CallsWithFailures: 1, AvgAttempts: 1},
		},
		{
			"stopped while waiting after attempt 2 made 2 attempts",
			[]audit.Event{
				{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 2, SpanID: "s2", StopReason: "deadline"},
				{Type: audit.TypeRetryAttempt, Category: cat, AttemptNumber: 2, SpanID: "s2"},
				{Type: audit.TypeRetryAttempt, Category: cat, AttemptNumber: 1, SpanID: "s1"},
			},
			audit.CategoryStats{Attempts: 2, Exhaustions: 1, RetriedCalls: 1, FailedCalls: 1, CallsWithFailures: 1, AvgAttempts: 2},
		},
		{
			"idempotency actions",
			[]audit.Event{
				{Type: audit.TypeIdempotency, Category: cat, Action: audit.ActionHit},
				{Type: audit.TypeIdempotency, Category: cat, Action: audit.ActionHit},
				{Type: audit.TypeIdempotency, Category: cat, Action: audit.ActionRecord},
				{Type: audit.TypeIdempotency, Category: cat, Action: audit.ActionTakeover},
				{Type: "job_state", Category: cat},
			},
			audit.CategoryStats{IdempotencyHits: 2, IdempotencyRecords: 1, Takeovers: 1},
		},
		{
			"time range cut off the attempts: rate clamped",
			[]audit.Event{
				{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 3},
				{Type: audit.TypeRetryExhausted, Category: cat, TotalAttempts: 1},
			},
			audit.CategoryStats{Exhaustions: 2, FailedCalls: 2, CallsWithFailures: 1, AvgAttempts: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := audit.ComputeStats(tt.events)
			if tt.events == nil {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Equal(t, tt.want, got[cat])
		})
	}
}

func TestComputeStatsByCategory(t *testing.T) {
	got := audit.ComputeStats(concat(call("A", "a", 3, 1), call("B", "b", 2, 2), call("A", "c", 3, 3)))
	require.Equal(t, audit.CategoryStats{Attempts: 3, Exhaustions: 1, RetriedCalls: 2, FailedCalls: 1, CallsWithFailures: 2, SuccessRate: 0.5, AvgAttempts: 2.5}, got["A"])
	require.Equal(t, audit.CategoryStats{Attempts: 1, Exhaustions: 1, RetriedCalls: 1, FailedCalls: 1, CallsWithFailures: 1, AvgAttempts: 2}, got["B"])
}

func TestStatsFromStream(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	events := concat(call("RETRY_KV_GET", "a", 3, 1), call("RETRY_KV_GET", "b", 3, 3), call("RETRY_NATS_CONNECT", "c", 5, 2))
	for i, ev := range events {
		ev.EventID, ev.Timestamp = audit.NewEventID(), base.Add(time.Duration(i)*time.Second)
		require.NoError(t, p.Emit(ctx, ev))
	}
	require.NoError(t, p.Flush(ctx))
	got, err := audit.Stats(ctx, e.js, e.cfg, audit.Filter{})
	require.NoError(t, err)
	require.Equal(t, audit.ComputeStats(events), got)
	got, err = audit.Stats(ctx, e.js, e.cfg, audit.Filter{Categories: []string{"RETRY_NATS_CONNECT"}})
	require.NoError(t, err)
	require.Equal(t, map[string]audit.CategoryStats{"RETRY_NATS_CONNECT": {Attempts: 2, RetriedCalls: 1, CallsWithFailures: 1, SuccessRate: 1, AvgAttempts: 3}}, got)
}
