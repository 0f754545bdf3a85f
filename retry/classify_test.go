package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/retry"
)

type netErr struct{ msg string }

func (e *netErr) Error() string { return e.msg }

type typedErr struct{}

func (typedErr) Error() string     { return "typed" }
func (typedErr) ErrorType() string { return "TimeoutError" }

func TestClassifyPrecedence(t *testing.T) {
	errVal := errors.New("value error")
	strict := retry.Policy{
		NonRetryable: []retry.Matcher{retry.Is(errVal), retry.As[*fs.PathError]()},
	}
	lenient := retry.Policy{ // seed 002's "lenient policy": non-retryable must still win
		NonRetryable: []retry.Matcher{retry.Is(errVal)},
		Retryable:    []retry.Matcher{retry.Is(errVal), retry.As[*netErr]()},
	}
	only := retry.Policy{Retryable: []retry.Matcher{retry.As[*netErr]()}}
	var none retry.Policy

	tests := []struct {
		name  string
		p     retry.Policy
		err   error
		class retry.Class
		hint  time.Duration
	}{
		{"no matchers: retry", none, io.EOF, retry.ClassRetryable, 0},
		{"permanent mark", none, retry.Permanent(io.EOF), retry.ClassPermanent, 0},
		{"wrapped permanent mark", none, fmt.Errorf("op: %w", retry.Permanent(io.EOF)), retry.ClassPermanent, 0},
		{"rate limited mark", none, retry.RateLimited(io.EOF, 3*time.Second), retry.ClassRateLimited, 3 * time.Second},
		{"wrapped rate limited", none, fmt.Errorf("a: %w", fmt.Errorf("b: %w", retry.RateLimited(io.EOF, time.Second))), retry.ClassRateLimited, time.Second},
		{"negative hint is zero", none, retry.RateLimited(io.EOF, -time.Second), retry.ClassRateLimited, 0},
		{"permanent wins over rate limited", none, retry.Permanent(retry.RateLimited(io.EOF, time.Second)), retry.ClassPermanent, 0},
		{"mark wins over retryable matcher", only, retry.Permanent(&netErr{"x"}), retry.ClassPermanent, 0},
		{"rate-limit mark wins over non-retryable matcher", strict, retry.RateLimited(errVal, time.Second), retry.ClassRateLimited, time.Second},
		{"non-retryable Is", strict, fmt.Errorf("wrap: %w", errVal), retry.ClassPermanent, 0},
		{"non-retryable As", strict, &fs.PathError{Op: "open", Path: "x", Err: os.ErrNotExist}, retry.ClassPermanent, 0},
		{"strict other error retried", strict, io.EOF, retry.ClassRetryable, 0},
		{"non-retryable beats retryable", lenient, errVal, retry.ClassPermanent, 0},
		{"retryable matched", lenient, &netErr{"reset"}, retry.ClassRetryable, 0},
		{"retryable list set, unmatched", only, io.EOF, retry.ClassPermanent, 0},
		{"retryable As through wrap", only, fmt.Errorf("w: %w", &netErr{"x"}), retry.ClassRetryable, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, hint := tt.p.Classify(tt.err)
			require.Equal(t, tt.class, class)
			require.Equal(t, tt.hint, hint)
		})
	}
}

func TestMarksAreTransparent(t *testing.T) {
	require.Nil(t, retry.Permanent(nil))
	require.Nil(t, retry.RateLimited(nil, time.Second))

	p := retry.Permanent(io.EOF)
	require.Equal(t, io.EOF.Error(), p.Error())
	require.ErrorIs(t, p, io.EOF)
	require.True(t, retry.IsPermanent(fmt.Errorf("x: %w", p)))
	require.False(t, retry.IsPermanent(io.EOF))

	rl := retry.RateLimited(io.EOF, 2*time.Second)
	require.Equal(t, io.EOF.Error(), rl.Error())
	after, ok := retry.RetryAfter(fmt.Errorf("x: %w", rl))
	require.True(t, ok)
	require.Equal(t, 2*time.Second, after)
	_, ok = retry.RetryAfter(io.EOF)
	require.False(t, ok)
}

func TestErrorType(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"errors.New", errors.New("x"), "*errors.errorString"},
		{"typed", typedErr{}, "TimeoutError"},
		{"typed wrapped", fmt.Errorf("a: %w", typedErr{}), "TimeoutError"},
		{"deadline", fmt.Errorf("a: %w", context.DeadlineExceeded), "context.DeadlineExceeded"},
		{"canceled", context.Canceled, "context.Canceled"},
		{"fmt wrapper skipped", fmt.Errorf("a: %w", &fs.PathError{Err: io.EOF}), "*fs.PathError"},
		{"marks skipped", retry.Permanent(fmt.Errorf("a: %w", &netErr{})), "*retry_test.netErr"},
		{"join takes first", errors.Join(&netErr{}, io.EOF), "*retry_test.netErr"},
		{"fmt without %w", fmt.Errorf("plain"), "*errors.errorString"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, retry.ErrorType(tt.err))
		})
	}
}

func TestNestedDoPermanentStaysPermanent(t *testing.T) {
	inner := &retry.Error{Reason: retry.StopPermanent, Cause: io.EOF}
	var p retry.Policy
	class, _ := p.Classify(fmt.Errorf("outer: %w", inner))
	require.Equal(t, retry.ClassPermanent, class)
	class, _ = p.Classify(&retry.Error{Reason: retry.StopExhausted, Cause: io.EOF})
	require.Equal(t, retry.ClassRetryable, class, "an inner exhaustion is the outer policy's call")
}
