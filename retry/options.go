package retry

import (
	"fmt"
	"maps"
)

// Option configures one call of Do. The options mirror the parameters of
// seed 002's execute_with_retry.
type Option func(*call) error

// call holds the options of one Do call.
type call struct {
	policy        *Policy
	key           string
	fingerprint   string
	tenant        string
	correlation   string
	traceID       string
	context       map[string]any
	notIdempotent bool
	failOpen      bool
	rememberFail  bool
	waitResult    bool
}

// newCall applies opts. It is only called when there are options, so the
// common no-option call allocates nothing for them.
func newCall(opts []Option) (*call, error) {
	c := new(call)
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithPolicy overrides the category's policy for this call. The policy must
// be valid.
func WithPolicy(p Policy) Option {
	return func(c *call) error {
		if err := p.Validate(); err != nil {
			return err
		}
		c.policy = &p
		return nil
	}
}

// WithIdempotencyKey runs the call under an idempotency key (see
// idempotency.Key): a completed result is returned from the store without
// running fn, concurrent duplicates never both run, and a success is
// recorded. The Manager must have a store (WithStore).
func WithIdempotencyKey(key string) Option {
	return func(c *call) error {
		if key == "" {
			return fmt.Errorf("%w: empty idempotency key", ErrInvalidOption)
		}
		c.key = key
		return nil
	}
}

// WithFingerprint sets the payload fingerprint stored with the idempotency
// claim (see idempotency.Fingerprint). A later call with the same key and a
// different fingerprint fails with idempotency.ErrKeyReuse. By default the
// fingerprint covers the category and operation.
func WithFingerprint(fp string) Option {
	return func(c *call) error {
		if fp == "" {
			return fmt.Errorf("%w: empty fingerprint", ErrInvalidOption)
		}
		c.fingerprint = fp
		return nil
	}
}

// WithTenant sets the tenant_id of the call's audit events.
func WithTenant(id string) Option {
	return func(c *call) error { c.tenant = id; return nil }
}

// WithCorrelation sets the correlation_id of the call's audit events.
func WithCorrelation(id string) Option {
	return func(c *call) error { c.correlation = id; return nil }
}

// WithTraceID sets the trace_id of the call's audit events. By default it is
// the OpenTelemetry trace id of the span in the context, if any.
func WithTraceID(id string) Option {
	return func(c *call) error { c.traceID = id; return nil }
}

// WithAdditionalContext adds fields to the additional_context of the call's
// audit events. Values must be encodable as JSON. Later calls add to
// earlier ones.
func WithAdditionalContext(fields map[string]any) Option {
	return func(c *call) error {
		if c.context == nil {
			c.context = make(map[string]any, len(fields))
		}
		maps.Copy(c.context, fields)
		return nil
	}
}

// NotIdempotent marks the operation as unsafe to repeat. Without an
// idempotency key it runs at most once: a failure is never retried (seed
// 000). With a key, the store guards against duplicates and retries are
// allowed.
func NotIdempotent() Option {
	return func(c *call) error { c.notIdempotent = true; return nil }
}

// FailOpen runs the operation without idempotency protection when the
// store cannot be reached, instead of failing closed. Use it only where a
// duplicate side effect is acceptable.
func FailOpen() Option {
	return func(c *call) error { c.failOpen = true; return nil }
}

// RememberFailure records a failed call in the idempotency store instead of
// releasing its claim, so later calls with the key fail with
// idempotency.ErrFailed until an operator clears it.
func RememberFailure() Option {
	return func(c *call) error { c.rememberFail = true; return nil }
}

// WaitForResult makes a call whose idempotency key another owner is running
// wait for that owner's result instead of failing at once with
// idempotency.ErrInProgress. It needs a store that implements
// idempotency.Waiter (Memory and KV do); with other stores the call fails
// with ErrInProgress as usual.
//
// A result the owner records is returned as a hit, and a failure it
// remembers as idempotency.ErrFailed. If the owner releases the key, or
// its lease ends without a result (it crashed), the call claims the key
// and runs fn itself; after a few such rounds lost to other callers it
// gives up with ErrInProgress. The wait is bounded by the call's context:
// when it ends, the error matches both idempotency.ErrInProgress and the
// context's error.
func WaitForResult() Option {
	return func(c *call) error { c.waitResult = true; return nil }
}
