package retry

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Category is a retry category code such as "RETRY_NATS_CONNECT". The
// categories package defines the 17 codes of seed 002 and their default
// policies; any other non-empty code is accepted and gets the manager's
// default policy.
type Category string

// Jitter is a kind of randomisation applied to a backoff delay.
type Jitter uint8

// Jitter kinds. The zero value is JitterProportional, seed 002's ±factor.
const (
	// JitterProportional adds a uniform offset in ±JitterFactor×delay
	// and clamps the result at 0 (seed 002). It may exceed MaxDelay by up
	// to the factor.
	JitterProportional Jitter = iota
	// JitterNone uses the capped exponential delay as it is.
	JitterNone
	// JitterFull draws uniformly from [0, delay).
	JitterFull
	// JitterEqual draws uniformly from [delay/2, delay).
	JitterEqual
	// JitterDecorrelated draws uniformly from [BaseDelay, 3×previous) and
	// caps at MaxDelay, where previous starts at BaseDelay ("decorrelated
	// jitter"). It ignores Multiplier.
	JitterDecorrelated
)

var jitterNames = [...]string{"proportional", "none", "full", "equal", "decorrelated"}

// String returns the kind's name, as ParseJitter accepts it.
func (j Jitter) String() string {
	if int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return fmt.Sprintf("jitter(%d)", uint8(j))
}

// ParseJitter returns the Jitter named s ("proportional", "none", "full",
// "equal" or "decorrelated"), or an error wrapping ErrInvalidPolicy.
func ParseJitter(s string) (Jitter, error) {
	for i, n := range jitterNames {
		if n == s {
			return Jitter(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown jitter %q", ErrInvalidPolicy, s)
}

// MarshalText implements encoding.TextMarshaler.
func (j Jitter) MarshalText() ([]byte, error) {
	if int(j) >= len(jitterNames) {
		return nil, fmt.Errorf("%w: unknown jitter %d", ErrInvalidPolicy, uint8(j))
	}
	return []byte(jitterNames[j]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (j *Jitter) UnmarshalText(b []byte) error {
	v, err := ParseJitter(string(b))
	if err != nil {
		return err
	}
	*j = v
	return nil
}

// Matcher reports whether an error belongs to a class. Build matchers with
// Is and As, or write one.
type Matcher func(error) bool

// Is returns a Matcher for errors.Is(err, target).
func Is(target error) Matcher {
	return func(err error) bool { return errors.Is(err, target) }
}

// As returns a Matcher for errors that errors.As can turn into an E.
func As[E error]() Matcher {
	return func(err error) bool {
		var e E
		return errors.As(err, &e)
	}
}

// Policy says how an operation is retried. The delay after failed attempt n
// is BaseDelay×Multiplier^(n-1), capped at MaxDelay, then jittered.
//
// Use DefaultPolicy or categories.Defaults as a starting point: the zero
// Policy is invalid (it has no attempts). A Policy is a value; copies are
// independent except for the Matcher slices, which must not be modified
// while the Policy is in use.
type Policy struct {
	// MaxAttempts is the total number of attempts, the first included.
	// It must be at least 1.
	MaxAttempts int `json:"max_attempts"`
	// BaseDelay is the delay after the first failed attempt. It must not be
	// negative.
	BaseDelay time.Duration `json:"base_delay"`
	// MaxDelay caps the exponential delay and retry-after hints. It must
	// be at least BaseDelay.
	MaxDelay time.Duration `json:"max_delay"`
	// Multiplier is the exponential growth per attempt. It must be at
	// least 1.
	Multiplier float64 `json:"multiplier"`
	// Jitter is the randomisation kind; the zero value is
	// JitterProportional.
	Jitter Jitter `json:"jitter"`
	// JitterFactor is the proportional jitter's ±fraction, in [0, 1].
	// Other kinds ignore it.
	JitterFactor float64 `json:"jitter_factor"`
	// AttemptTimeout bounds each attempt's context. Zero means no bound
	// beyond the caller's context.
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty"`
	// MaxElapsed bounds the whole call, waits included: no attempt starts
	// after it. Zero means no bound beyond the caller's context.
	MaxElapsed time.Duration `json:"max_elapsed,omitempty"`
	// NonRetryable errors fail at once. They win over Retryable.
	NonRetryable []Matcher `json:"-"`
	// Retryable errors are retried. When it is empty every error not
	// matched by NonRetryable is retried; when it is not, only matched
	// errors are.
	Retryable []Matcher `json:"-"`
}

// DefaultPolicy returns seed 002's default RetryPolicy: 3 attempts, 1 s
// base, 30 s max, ×2, ±10% jitter. A Manager uses it for categories it has
// no policy for, unless told otherwise.
func DefaultPolicy() Policy {
	return Policy{
		MaxAttempts:  3,
		BaseDelay:    time.Second,
		MaxDelay:     30 * time.Second,
		Multiplier:   2,
		Jitter:       JitterProportional,
		JitterFactor: 0.1,
	}
}

// PolicyError is returned by Policy.Validate. It names the offending field.
type PolicyError struct {
	Field  string // the Go field name, e.g. "MaxAttempts"
	Reason string
}

func (e *PolicyError) Error() string {
	return "retry: invalid policy: " + e.Field + " " + e.Reason
}

// Is makes a PolicyError match ErrInvalidPolicy.
func (e *PolicyError) Is(target error) bool { return target == ErrInvalidPolicy }

// Validate reports the first problem with p as a *PolicyError, which
// matches ErrInvalidPolicy.
func (p Policy) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &PolicyError{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case p.MaxAttempts < 1:
		return bad("MaxAttempts", "must be at least 1, got %d", p.MaxAttempts)
	case p.BaseDelay < 0:
		return bad("BaseDelay", "must not be negative, got %v", p.BaseDelay)
	case p.MaxDelay < 0:
		return bad("MaxDelay", "must not be negative, got %v", p.MaxDelay)
	case p.MaxDelay < p.BaseDelay:
		return bad("MaxDelay", "must be at least BaseDelay (%v), got %v", p.BaseDelay, p.MaxDelay)
	case math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0) || p.Multiplier < 1:
		return bad("Multiplier", "must be a finite number at least 1, got %v", p.Multiplier)
	case int(p.Jitter) >= len(jitterNames):
		return bad("Jitter", "unknown kind %d", uint8(p.Jitter))
	case math.IsNaN(p.JitterFactor) || p.JitterFactor < 0 || p.JitterFactor > 1:
		return bad("JitterFactor", "must be in [0, 1], got %v", p.JitterFactor)
	case p.AttemptTimeout < 0:
		return bad("AttemptTimeout", "must not be negative, got %v", p.AttemptTimeout)
	case p.MaxElapsed < 0:
		return bad("MaxElapsed", "must not be negative, got %v", p.MaxElapsed)
	}
	for i, m := range p.NonRetryable {
		if m == nil {
			return bad("NonRetryable", "entry %d is nil", i)
		}
	}
	for i, m := range p.Retryable {
		if m == nil {
			return bad("Retryable", "entry %d is nil", i)
		}
	}
	return nil
}
