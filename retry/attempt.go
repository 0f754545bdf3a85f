package retry

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"sync/atomic"
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
	// IdempotencyKey is the call's idempotency key, or "". Operations can
	// derive a downstream dedupe id from it (a Nats-Msg-Id, say), so that a
	// run taken over after a crash repeats the same id.
	IdempotencyKey string
}

type attemptKey struct{}

// attemptCtx carries the attempt. It is the single allocation of an
// attempt: one struct that both is the context and holds the value. The
// span id is drawn on first use, so attempts nobody inspects do not pay
// for it.
type attemptCtx struct {
	context.Context
	number    int
	category  Category
	operation string
	key       string
	span      atomic.Uint64 // 0 until drawn
}

func (c *attemptCtx) Value(key any) any {
	if key == (attemptKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// spanID returns the attempt's span id, drawing it on first use. It is
// safe for concurrent use: every caller sees the same id.
func (c *attemptCtx) spanID() SpanID {
	u := c.span.Load()
	if u == 0 {
		u = newSpanUint()
		if !c.span.CompareAndSwap(0, u) {
			u = c.span.Load()
		}
	}
	var s SpanID
	binary.BigEndian.PutUint64(s[:], u)
	return s
}

// AttemptFrom returns the Attempt in ctx, which Do puts in the context of
// every attempt.
func AttemptFrom(ctx context.Context) (Attempt, bool) {
	c, ok := ctx.Value(attemptKey{}).(*attemptCtx)
	if !ok {
		return Attempt{}, false
	}
	return Attempt{Number: c.number, SpanID: c.spanID(), Category: c.category, Operation: c.operation, IdempotencyKey: c.key}, true
}

// newSpanUint returns random non-zero span id bits. Span ids are
// identifiers, not decisions, so they come from math/rand/v2 rather than
// the manager's Random, which stays dedicated to jitter and is exactly
// scriptable.
func newSpanUint() uint64 {
	for {
		if u := rand.Uint64(); u != 0 {
			return u
		}
	}
}

// newSpanID returns a random non-zero span id.
func newSpanID() SpanID {
	var s SpanID
	binary.BigEndian.PutUint64(s[:], newSpanUint())
	return s
}
