// Package retry runs operations with bounded, policy-driven, jittered and
// audited retries.
//
// # Policies
//
// A Policy says how many attempts an operation gets and how long to wait
// between them: the delay after failed attempt n is
// BaseDelay×Multiplier^(n-1), capped at MaxDelay, then jittered (seed 002's
// ±JitterFactor by default; full, equal and decorrelated jitter are also
// offered). The math is pure (Policy.Backoff, Policy.Delay); Do never waits
// after the last attempt. A Manager maps retry categories to policies; the
// categories package holds seed 002's matrix:
//
//	mgr, err := categories.NewManager(retry.WithEmitter(emitter), retry.WithStore(store))
//
// Categories without a policy of their own get the manager's default
// policy, DefaultPolicy() unless WithDefaultPolicy says otherwise.
//
// # Classification
//
// Whether an error is retried is decided in this order:
//
//  1. an explicit mark: Permanent(err) never retries; RateLimited(err, d)
//     retries after the hint d (clamped to MaxDelay);
//  2. the policy's NonRetryable matchers: fail at once;
//  3. its Retryable matchers: retry (when the list is set, only matches
//     are retried);
//  4. otherwise retry.
//
// Non-retryable wins over retryable, unlike seed 002's "lenient policy"
// example, because retrying unsafe work is the worse failure. Marks survive
// fmt.Errorf("%w") wrapping and never change the error the caller sees.
//
// # Attempts and errors
//
// Each attempt runs with a context carrying its Attempt (AttemptFrom): the
// 1-based number and a fresh span id. When ctx ends Do returns at once, even
// mid-wait; when the next wait would pass ctx's deadline or the policy's
// MaxElapsed, Do fails at once and reports the due wait in
// Error.RetryAfter. A failed call returns an *Error that wraps the last
// cause and gives the StopReason; it matches ErrExhausted when the budget
// was spent.
//
// # Idempotency
//
// With WithIdempotencyKey, Do claims the key in the manager's
// idempotency.Store before running: a completed key returns the recorded
// result (an idempotency "hit" event), a key claimed by a live owner gives
// idempotency.ErrInProgress, an expired claim (a crashed owner) is taken
// over and audited, and a success is recorded ("record"). The claim's lease
// is renewed while the call runs. If the store cannot be reached Do fails
// closed unless FailOpen is given. An operation marked NotIdempotent is
// never retried without a key.
//
// # Audit and telemetry
//
// Failed attempts that will be retried emit retry_attempt events and failed
// calls emit retry_exhausted, with seed 002's fields (see package audit).
// With an OpenTelemetry SDK installed, each Do is a span with an event per
// attempt and error.type, and the counters jetretry.attempts,
// jetretry.exhausted and jetretry.idempotency and the histogram
// jetretry.retry.delay are recorded.
//
// # Designed to grow
//
// A Do call is one recovery stage over an attempt counter that outlives it;
// seed 000's recovery stacks (retry, repair, fallback, bubble chosen by
// error type) and seed 001's scopes build on the same runner.
package retry
