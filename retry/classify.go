package retry

import (
	"time"
)

// Class is what the classifier decided about a failed attempt's error.
type Class uint8

// Classes, from Policy.Classify.
const (
	// ClassRetryable: retry after the policy's backoff.
	ClassRetryable Class = iota + 1
	// ClassRateLimited: retry after the hinted time (clamped to MaxDelay).
	ClassRateLimited
	// ClassPermanent: do not retry.
	ClassPermanent
)

// String returns the class name.
func (c Class) String() string {
	switch c {
	case ClassRetryable:
		return "retryable"
	case ClassRateLimited:
		return "rate_limited"
	case ClassPermanent:
		return "permanent"
	}
	return "unknown"
}

// permanentError marks an error as not retryable. It is transparent: its
// message is the wrapped error's, and Do strips it from the error it
// returns when it is outermost.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// rateLimitedError marks an error as retryable after a hinted time.
type rateLimitedError struct {
	err   error
	after time.Duration
}

func (e *rateLimitedError) Error() string { return e.err.Error() }
func (e *rateLimitedError) Unwrap() error { return e.err }

// Permanent marks err as not retryable, whatever the policy's matchers say.
// The mark survives wrapping with fmt.Errorf("%w"), does not change the
// message, and is removed from the error Do returns when it is outermost.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// RateLimited marks err as retryable after the hinted time (for example a
// server's Retry-After), instead of the policy's backoff. The hint is
// clamped to the policy's MaxDelay; when it is longer than the time left
// before the context's deadline or the policy's MaxElapsed, Do fails at once
// and reports the hint in Error.RetryAfter, so that a durable layer can
// reschedule. A negative hint counts as zero. RateLimited(nil, d) is nil.
func RateLimited(err error, after time.Duration) error {
	if err == nil {
		return nil
	}
	return &rateLimitedError{err: err, after: after}
}

// IsPermanent reports whether err carries a Permanent mark.
func IsPermanent(err error) bool {
	p, _ := findMarks(err)
	return p
}

// RetryAfter returns the hint of a RateLimited mark in err's chain.
func RetryAfter(err error) (time.Duration, bool) {
	_, rl := findMarks(err)
	if rl == nil {
		return 0, false
	}
	return max(rl.after, 0), true
}

// findMarks walks err's chain depth-first, as errors.As does, and reports
// whether it holds a Permanent mark and the first RateLimited mark. It does
// not allocate, unlike errors.As with a pointer target.
func findMarks(err error) (permanent bool, rl *rateLimitedError) {
	for err != nil {
		switch e := err.(type) {
		case *permanentError:
			return true, rl
		case *Error:
			// A nested Do that stopped for good stays stopped: an outer
			// Do does not retry what the inner one judged permanent.
			if e.Reason == StopPermanent || e.Reason == StopNotIdempotent {
				return true, rl
			}
		case *rateLimitedError:
			if rl == nil {
				rl = e
			}
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				p, r := findMarks(inner)
				if rl == nil {
					rl = r
				}
				if p {
					return true, rl
				}
			}
			return false, rl
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false, rl
		}
		err = u.Unwrap()
	}
	return false, rl
}

// Classify decides whether err is retried under p, with this precedence:
//
//  1. an explicit mark: Permanent (or an *Error from a nested Do that
//     stopped as permanent or not idempotent), then RateLimited (with its
//     hint);
//  2. p.NonRetryable matchers: permanent;
//  3. p.Retryable matchers: retryable; if the list is not empty and none
//     matches, permanent;
//  4. otherwise retryable.
//
// Non-retryable wins over retryable because retrying unsafe work is the
// worse failure. (Seed 002's "lenient policy" example, where a retryable
// entry overrides a non-retryable one, is deliberately not followed.)
// The returned duration is the rate-limit hint, unclamped.
func (p *Policy) Classify(err error) (Class, time.Duration) {
	perm, rl := findMarks(err)
	if perm {
		return ClassPermanent, 0
	}
	if rl != nil {
		return ClassRateLimited, max(rl.after, 0)
	}
	for _, m := range p.NonRetryable {
		if m(err) {
			return ClassPermanent, 0
		}
	}
	if len(p.Retryable) == 0 {
		return ClassRetryable, 0
	}
	for _, m := range p.Retryable {
		if m(err) {
			return ClassRetryable, 0
		}
	}
	return ClassPermanent, 0
}

// stripMarks removes outermost Permanent and RateLimited marks, so the
// caller sees its own error. Marks deeper in a chain are transparent.
func stripMarks(err error) error {
	for {
		switch e := err.(type) {
		case *permanentError:
			err = e.err
		case *rateLimitedError:
			err = e.err
		default:
			return err
		}
	}
}
