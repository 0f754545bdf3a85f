package retry

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
)

// SpanID identifies one attempt. Every attempt gets a fresh one (seed 000:
// a retry generates a new span_id per attempt); it appears in the audit
// events of that attempt.
type SpanID [8]byte

// String returns the id as 16 lowercase hex digits.
func (s SpanID) String() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s is the zero id.
func (s SpanID) IsZero() bool { return s == SpanID{} }

// Attempt describes the attempt a function is running as.
type Attempt struct {
	// Number is the 1-based attempt number.
	Number int
	// SpanID is this attempt's fresh span id.
	SpanID SpanID
	// Category and Operation are the ones given to Do.
	Category  Category
	Operation string
}

type attemptKey struct{}

// attemptCtx carries the Attempt. It is a single allocation per attempt:
// one struct that both is the context and holds the value.
type attemptCtx struct {
	context.Context
	a Attempt
}

func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return &c.a
	}
	return c.Context.Value(key)
}

// AttemptFrom returns the Attempt in ctx, which Do puts in the context of
// every attempt.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	a, ok := ctx.Value(attemptKey{}).(*Attempt)
	if !ok {
		return Attempt{}, false
	}
	return *a, true
}

// newSpanID returns a random non-zero span id. Span ids are identifiers,
// not decisions, so they come from math/rand/v2 rather than the manager's
// Random, which stays dedicated to jitter and is exactly scriptable.
func newSpanID() SpanID {
	var s SpanID
	for s.IsZero() {
		u := rand.Uint64()
		for i := range s {
			s[i] = byte(u >> (8 * i))
		}
	}
	return s
}
