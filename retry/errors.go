package retry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

var (
	// ErrExhausted matches an *Error whose Reason is StopExhausted or
	// StopElapsed: the attempt or time budget was spent.
	ErrExhausted = errors.New("retry: attempts exhausted")
	// ErrInvalidPolicy matches errors about a bad Policy (see PolicyError).
	ErrInvalidPolicy = errors.New("retry: invalid policy")
	// ErrInvalidOption matches errors about a bad Option or ManagerOption.
	ErrInvalidOption = errors.New("retry: invalid option")
)

// StopReason says why Do stopped retrying.
type StopReason uint8

// Stop reasons.
const (
	// StopExhausted: MaxAttempts attempts failed.
	StopExhausted StopReason = iota + 1
	// StopElapsed: the next attempt would start after MaxElapsed.
	StopElapsed
	// StopPermanent: the error was classified permanent.
	StopPermanent
	// StopDeadline: the context's deadline passed, or the next wait would
	// pass it.
	StopDeadline
	// StopCanceled: the context was canceled.
	StopCanceled
	// StopNotIdempotent: the operation was marked not idempotent and had no
	// idempotency key, so it may not be retried.
	StopNotIdempotent
	// StopLeaseLost: the idempotency claim was lost (taken over or
	// cleared) while retrying, so continuing could duplicate the work.
	StopLeaseLost
)

var stopNames = [...]string{"", "exhausted", "elapsed", "permanent", "deadline", "canceled", "not_idempotent", "lease_lost"}

// String returns the reason's name, as written to audit events.
func (r StopReason) String() string {
	if int(r) < len(stopNames) && r != 0 {
		return stopNames[r]
	}
	return fmt.Sprintf("stop(%d)", uint8(r))
}

// Error is the error Do returns when the operation failed. It keeps the last
// attempt's error (without Permanent or RateLimited marks) as Cause, so
// errors.Is and errors.As see through it.
//
// It matches ErrExhausted when the attempt or time budget was spent,
// context.DeadlineExceeded when it stopped for a deadline and
// context.Canceled when it was canceled.
type Error struct {
	Category  Category
	Operation string
	// Attempts is the number of attempts made.
	Attempts int
	// Elapsed is the time from the start of Do to the stop.
	Elapsed time.Duration
	// Reason says why retrying stopped.
	Reason StopReason
	// RetryAfter is the wait that was due when Do stopped early for a
	// deadline or MaxElapsed: a rate-limit hint or the backoff delay. A
	// durable layer can reschedule after it. Zero otherwise.
	RetryAfter time.Duration
	// Cause is the last attempt's error.
	Cause error
	// ctxErr is the context's error when Reason is StopCanceled or
	// StopDeadline and the context had ended.
	ctxErr error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("retry: ")
	b.WriteString(string(e.Category))
	if e.Operation != "" {
		b.WriteString(" ")
		b.WriteString(e.Operation)
	}
	fmt.Fprintf(&b, ": %s after %d attempt", e.Reason, e.Attempts)
	if e.Attempts != 1 {
		b.WriteString("s")
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	if e.Cause != nil {
		b.WriteString(": ")
		b.WriteString(e.Cause.Error())
	} else if e.ctxErr != nil {
		b.WriteString(": ")
		b.WriteString(e.ctxErr.Error())
	}
	return b.String()
}

// Unwrap returns the cause and, when the context ended, its error.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

// Is reports whether the stop reason matches target (see Error).
func (e *Error) Is(target error) bool {
	switch target {
	case ErrExhausted:
		return e.Reason == StopExhausted || e.Reason == StopElapsed
	case context.DeadlineExceeded:
		return e.Reason == StopDeadline
	case context.Canceled:
		return e.Reason == StopCanceled
	}
	return false
}

// ErrorTyper is implemented by errors that name their own type for audit
// events and the OpenTelemetry error.type attribute.
type ErrorTyper interface {
	ErrorType() string
}

// ErrorType names err's type for audit events (exception_type) and
// telemetry (error.type):
//
//   - the ErrorType of the first error in the chain that implements
//     ErrorTyper;
//   - "context.DeadlineExceeded" or "context.Canceled" for those;
//   - otherwise the Go type of the outermost error that is not a plain
//     wrapper (fmt.Errorf, errors.Join or a retry mark), such as
//     "*net.OpError".
//
// It returns "" for a nil error.
func ErrorType(err error) string {
	if err == nil {
		return ""
	}
	if t := typerIn(err); t != "" {
		return t
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	}
	for {
		switch e := err.(type) {
		case *permanentError:
			err = e.err
			continue
		case *rateLimitedError:
			err = e.err
			continue
		}
		t := reflect.TypeOf(err).String()
		switch t {
		case "*fmt.wrapError":
			if next := errors.Unwrap(err); next != nil {
				err = next
				continue
			}
		case "*fmt.wrapErrors", "*errors.joinError":
			if u, ok := err.(interface{ Unwrap() []error }); ok {
				if errs := u.Unwrap(); len(errs) > 0 && errs[0] != nil {
					err = errs[0]
					continue
				}
			}
		}
		return t
	}
}

// typerIn returns the ErrorType of the first ErrorTyper in err's chain,
// walked depth-first as errors.As does, or "".
func typerIn(err error) string {
	for err != nil {
		if t, ok := err.(ErrorTyper); ok {
			return t.ErrorType()
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				if t := typerIn(inner); t != "" {
					return t
				}
			}
			return ""
		default:
			return ""
		}
	}
	return ""
}
