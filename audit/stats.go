package audit

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// CategoryStats summarizes the audit events of one retry category: seed
// 002's "Retry Pattern Analysis" (total attempts, success rate, average
// attempts), computed from the events alone.
//
// A call that succeeds at its first attempt emits no retry event, so it is
// not counted: the calls below are those that failed at least once, and
// SuccessRate and AvgAttempts describe them, not all calls.
type CategoryStats struct {
	// Attempts counts retry_attempt events: failed attempts that were
	// followed by a wait and another attempt.
	Attempts int
	// Exhaustions counts retry_exhausted events: calls that ended in
	// failure, whatever the stop_reason (exhausted, permanent, deadline,
	// ...).
	Exhaustions int
	// IdempotencyHits, IdempotencyRecords and Takeovers count idempotency
	// events by action: hit, record and takeover.
	IdempotencyHits    int
	IdempotencyRecords int
	Takeovers          int
	// RetriedCalls counts calls whose first attempt failed and was
	// retried: retry_attempt events with attempt_number 1.
	RetriedCalls int
	// FailedCalls counts calls that ended in failure; it equals
	// Exhaustions.
	FailedCalls int
	// CallsWithFailures counts calls that failed at least once:
	// RetriedCalls plus the retry_exhausted events with total_attempts 1
	// (calls that failed at once without a retry, such as on a permanent
	// error). An exhausted event with total_attempts 1 that shares its
	// span_id with a retry_attempt event is the same call, stopped while
	// waiting for its second attempt, and is not counted twice.
	CallsWithFailures int
	// SuccessRate is the share of CallsWithFailures that eventually
	// succeeded: (CallsWithFailures - FailedCalls) / CallsWithFailures, or
	// 0 when CallsWithFailures is 0. It is clamped at 0, which it can only
	// pass when a time range cuts a call's events in two.
	SuccessRate float64
	// AvgAttempts is the mean number of attempts per call with failures:
	// each such call made one attempt per retry_attempt event plus a final
	// one (its success, or the failure that ended it), so
	// (Attempts + CallsWithFailures) / CallsWithFailures, or 0 when
	// CallsWithFailures is 0. A call stopped while waiting (its
	// retry_exhausted event shares its span_id with a retry_attempt)
	// made no final attempt, and is counted so.
	AvgAttempts float64
}

// ComputeStats returns the CategoryStats of events, by retry_category.
// Events of other types count in no field, but their category appears in
// the map. It is a pure function; events may be in any order.
func ComputeStats(events []Event) map[string]CategoryStats {
	var a statsAcc
	for _, e := range events {
		a.add(e)
	}
	return a.result()
}

// Stats reads the events matching f from the audit stream, as Query does,
// and returns their ComputeStats. With a *DecodeError it returns the stats
// of the events that decoded; with another error, nil.
func Stats(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, f Filter) (map[string]CategoryStats, error) {
	var a statsAcc
	err := scan(ctx, js, cfg, f, false, func(e Event) error {
		a.add(e)
		return nil
	})
	if _, ok := err.(*DecodeError); err != nil && !ok {
		return nil, err
	}
	return a.result(), err
}

// statsAcc accumulates events for ComputeStats without keeping them.
type statsAcc struct {
	cats map[string]*catAcc
}

type catAcc struct {
	CategoryStats
	// span ids of retry_attempt events, to recognize an exhausted event of
	// a call stopped while waiting.
	attemptSpans map[string]int // span_id -> attempt_number
	// exhausted events with a span_id, checked at the end, since events
	// may come in any order: span_id -> total_attempts.
	exhaustedSpans []spanTotal
}

type spanTotal struct {
	span  string
	total int
}

func (a *statsAcc) add(e Event) {
	if a.cats == nil {
		a.cats = make(map[string]*catAcc)
	}
	c := a.cats[e.Category]
	if c == nil {
		c = &catAcc{}
		a.cats[e.Category] = c
	}
	switch e.Type {
	case TypeRetryAttempt:
		c.Attempts++
		if e.AttemptNumber == 1 {
			c.RetriedCalls++
		}
		if e.SpanID != "" {
			if c.attemptSpans == nil {
				c.attemptSpans = make(map[string]int)
			}
			c.attemptSpans[e.SpanID] = e.AttemptNumber
		}
	case TypeRetryExhausted:
		c.Exhaustions++
		if e.SpanID != "" {
			c.exhaustedSpans = append(c.exhaustedSpans, spanTotal{e.SpanID, e.TotalAttempts})
		} else if e.TotalAttempts == 1 {
			c.CallsWithFailures++
		}
	case TypeIdempotency:
		switch e.Action {
		case ActionHit:
			c.IdempotencyHits++
		case ActionRecord:
			c.IdempotencyRecords++
		case ActionTakeover:
			c.Takeovers++
		}
	}
}

func (a *statsAcc) result() map[string]CategoryStats {
	out := make(map[string]CategoryStats, len(a.cats))
	for cat, c := range a.cats {
		s := c.CategoryStats
		interrupted := 0
		for _, x := range c.exhaustedSpans {
			_, waited := c.attemptSpans[x.span]
			if waited {
				interrupted++
			}
			if x.total == 1 && !waited {
				s.CallsWithFailures++
			}
		}
		s.FailedCalls = s.Exhaustions
		s.CallsWithFailures += s.RetriedCalls
		if n := s.CallsWithFailures; n > 0 {
			// Clamped: a Filter can cut a call's events in two.
			s.SuccessRate = max(0, float64(n-s.FailedCalls)/float64(n))
			s.AvgAttempts = float64(s.Attempts+n-interrupted) / float64(n)
		}
		out[cat] = s
	}
	return out
}
