package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/retry"
	"github.com/jetretry/jetretry/retry/retrytest"
)

const testCat retry.Category = "RETRY_TEST"

var epoch = time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)

type fixture struct {
	clk *retrytest.Clock
	rnd *retrytest.Random
	em  *audit.Memory
	mgr *retry.Manager
}

func newFixture(t *testing.T, p retry.Policy, floats []float64, opts ...retry.ManagerOption) *fixture {
	t.Helper()
	f := &fixture{clk: retrytest.NewClock(epoch), rnd: retrytest.NewRandom(floats...), em: &audit.Memory{}}
	base := []retry.ManagerOption{
		retry.WithPolicies(map[retry.Category]retry.Policy{testCat: p}),
		retry.WithClock(f.clk), retry.WithRandom(f.rnd), retry.WithEmitter(f.em),
	}
	m, err := retry.NewManager(append(base, opts...)...)
	require.NoError(t, err)
	f.mgr = m
	return f
}

type result[T any] struct {
	v   T
	err error
}

// start runs Do in a goroutine.
func start[T any](ctx context.Context, m *retry.Manager, fn func(context.Context) (T, error), opts ...retry.Option) <-chan result[T] {
	ch := make(chan result[T], 1)
	go func() {
		v, err := retry.Do(ctx, m, testCat, "test op", fn, opts...)
		ch <- result[T]{v, err}
	}()
	return ch
}

// expectWait waits for the call to schedule a wait, checks its length and
// lets it pass.
func (f *fixture) expectWait(t *testing.T, want time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, f.clk.WaitForTimers(ctx, 1), "no wait was scheduled")
	pending := f.clk.Pending()
	require.Len(t, pending, 1)
	require.InDelta(t, float64(want), float64(pending[0]), 1, "wait %v, want %v", pending[0], want)
	f.clk.Advance(pending[0])
}

func recv[T any](t *testing.T, ch <-chan result[T]) result[T] {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("Do did not return")
		return result[T]{}
	}
}

func policy(attempts int, base, maxDelay time.Duration) retry.Policy {
	return retry.Policy{MaxAttempts: attempts, BaseDelay: base, MaxDelay: maxDelay, Multiplier: 2, JitterFactor: 0.1}
}

func TestDoSuccessFirstAttempt(t *testing.T) {
	f := newFixture(t, policy(3, time.Second, 10*time.Second), nil)
	var seen retry.Attempt
	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "parent value")
	v, err := retry.Do(ctx, f.mgr, testCat, "op", func(ctx context.Context) (string, error) {
		a, ok := retry.AttemptFrom(ctx)
		require.True(t, ok)
		seen = a
		require.Equal(t, "parent value", ctx.Value(ctxKey{}))
		return "ok", nil
	})
	require.NoError(t, err)
	require.Equal(t, "ok", v)
	require.Equal(t, 1, seen.Number)
	require.False(t, seen.SpanID.IsZero())
	require.Len(t, seen.SpanID.String(), 16)
	require.Equal(t, testCat, seen.Category)
	require.Equal(t, "op", seen.Operation)
	require.Zero(t, f.em.Len(), "a first-attempt success emits no events")
	_, ok := retry.AttemptFrom(context.Background())
	require.False(t, ok)
}

func TestDoRetriesWithExactDelays(t *testing.T) {
	// ±10% jitter with scripted randoms 0.5, 0, 0.75: 1s, 1.8s, 4.2s.
	f := newFixture(t, policy(4, time.Second, 10*time.Second), []float64{0.5, 0, 0.75})
	var attempts []retry.Attempt
	fail := errors.New("connection timeout")
	ch := start(context.Background(), f.mgr, func(ctx context.Context) (int, error) {
		a, _ := retry.AttemptFrom(ctx)
		attempts = append(attempts, a)
		if a.Number < 4 {
			return 0, fail
		}
		return 42, nil
	}, retry.WithTenant("tenant-123"), retry.WithCorrelation("corr-456"), retry.WithTraceID("trace-789"),
		retry.WithAdditionalContext(map[string]any{"subject": "orders.created"}))
	f.expectWait(t, time.Second)
	f.expectWait(t, 1800*time.Millisecond)
	f.expectWait(t, 4200*time.Millisecond)
	r := recv(t, ch)
	require.NoError(t, r.err)
	require.Equal(t, 42, r.v)

	require.Len(t, attempts, 4)
	spans := map[retry.SpanID]bool{}
	for i, a := range attempts {
		require.Equal(t, i+1, a.Number)
		spans[a.SpanID] = true
	}
	require.Len(t, spans, 4, "every attempt has a fresh span id")

	events := f.em.Events()
	require.Len(t, events, 3)
	wantDelay := []float64{1, 1.8, 4.2}
	for i, e := range events {
		require.Equal(t, audit.TypeRetryAttempt, e.Type)
		require.Equal(t, string(testCat), e.Category)
		require.Equal(t, "test op", e.Operation)
		require.Equal(t, i+1, e.AttemptNumber, "attempt_number is the attempt that failed")
		require.Equal(t, 4, e.MaxAttempts)
		require.InDelta(t, wantDelay[i], e.DelaySeconds, 1e-9, "delay_seconds is the wait before the next attempt")
		require.Equal(t, "*errors.errorString", e.ExceptionType)
		require.Equal(t, "connection timeout", e.ExceptionMessage)
		require.Equal(t, "tenant-123", e.TenantID)
		require.Equal(t, "corr-456", e.CorrelationID)
		require.Equal(t, "trace-789", e.TraceID)
		require.Equal(t, attempts[i].SpanID.String(), e.SpanID)
		require.Equal(t, map[string]any{"subject": "orders.created"}, e.AdditionalContext)
		require.Equal(t, audit.SchemaVersion, e.SchemaVersion)
		require.NoError(t, e.Validate())
	}
	require.Equal(t, epoch, events[0].Timestamp)
	require.Equal(t, epoch.Add(time.Second), events[1].Timestamp)
}

func TestDoExhaustedDoesNotSleepAfterLastAttempt(t *testing.T) {
	f := newFixture(t, policy(3, time.Second, 10*time.Second), []float64{0.5})
	cause := &netErr{"KV operation timeout"}
	calls := 0
	ch := start(context.Background(), f.mgr, func(context.Context) (string, error) {
		calls++
		return "", fmt.Errorf("get: %w", cause)
	})
	f.expectWait(t, time.Second)
	f.expectWait(t, 2*time.Second)
	r := recv(t, ch)
	require.Empty(t, f.clk.Pending(), "no wait after the last attempt")
	require.Equal(t, 3, calls)

	require.ErrorIs(t, r.err, retry.ErrExhausted)
	var target *netErr
	require.ErrorAs(t, r.err, &target)
	require.Same(t, cause, target)
	var re *retry.Error
	require.ErrorAs(t, r.err, &re)
	require.Equal(t, retry.StopExhausted, re.Reason)
	require.Equal(t, 3, re.Attempts)
	require.Equal(t, 3*time.Second, re.Elapsed)
	require.Equal(t, "retry: RETRY_TEST test op: exhausted after 3 attempts: get: KV operation timeout", r.err.Error())
	require.NotErrorIs(t, r.err, context.Canceled)

	events := f.em.Events()
	require.Len(t, events, 3)
	ex := events[2]
	require.Equal(t, audit.TypeRetryExhausted, ex.Type)
	require.Equal(t, 3, ex.TotalAttempts)
	require.Equal(t, "*retry_test.netErr", ex.FinalExceptionType)
	require.Equal(t, "get: KV operation timeout", ex.FinalExceptionMessage)
	require.Equal(t, "exhausted", ex.StopReason)
	require.Equal(t, epoch.Add(3*time.Second), ex.Timestamp)
}

func TestDoPermanentStopsAndStripsMark(t *testing.T) {
	f := newFixture(t, policy(5, time.Second, 10*time.Second), nil)
	calls := 0
	_, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(context.Context) (int, error) {
		calls++
		return 0, retry.Permanent(io.ErrUnexpectedEOF)
	})
	require.Equal(t, 1, calls)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, retry.StopPermanent, re.Reason)
	require.Equal(t, io.ErrUnexpectedEOF, re.Cause, "the mark is removed from the cause")
	require.False(t, retry.IsPermanent(re.Cause), "the mark does not leak into the cause")
	require.True(t, retry.IsPermanent(err), "an outer Do must not retry it either")
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.NotErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, "retry: RETRY_TEST op: permanent after 1 attempt: unexpected EOF", err.Error())
	events := f.em.Events()
	require.Len(t, events, 1)
	require.Equal(t, audit.TypeRetryExhausted, events[0].Type)
	require.Equal(t, "permanent", events[0].StopReason)
}

func TestDoNonRetryableMatcher(t *testing.T) {
	p := policy(5, time.Second, 10*time.Second)
	p.NonRetryable = []retry.Matcher{retry.Is(io.EOF)}
	f := newFixture(t, p, nil)
	calls := 0
	_, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(context.Context) (int, error) {
		calls++
		return 0, fmt.Errorf("read: %w", io.EOF)
	})
	require.Equal(t, 1, calls)
	require.ErrorIs(t, err, io.EOF)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, retry.StopPermanent, re.Reason)
}

func TestDoCancelDuringWaitReturnsPromptly(t *testing.T) {
	f := newFixture(t, policy(5, time.Hour, 2*time.Hour), []float64{0.5})
	ctx, cancel := context.WithCancel(context.Background())
	ch := start(ctx, f.mgr, func(context.Context) (int, error) { return 0, io.EOF })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, f.clk.WaitForTimers(wctx, 1))
	require.Equal(t, []time.Duration{time.Hour}, f.clk.Pending())
	cancel()
	r := recv(t, ch) // the fake clock never moves: only cancellation can end the wait
	require.ErrorIs(t, r.err, context.Canceled)
	require.ErrorIs(t, r.err, io.EOF)
	require.NotErrorIs(t, r.err, retry.ErrExhausted)
	var re *retry.Error
	require.ErrorAs(t, r.err, &re)
	require.Equal(t, retry.StopCanceled, re.Reason)
	require.Equal(t, 1, re.Attempts)
	require.Zero(t, re.Elapsed)
	require.Empty(t, f.clk.Pending(), "the timer was stopped")
	events := f.em.Events()
	require.Len(t, events, 2)
	require.Equal(t, "canceled", events[1].StopReason)
}

func TestDoContextEndedBeforeStart(t *testing.T) {
	f := newFixture(t, policy(3, 0, 0), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) { called = true; return 1, nil })
	require.False(t, called)
	require.ErrorIs(t, err, context.Canceled)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Zero(t, re.Attempts)
	require.Zero(t, f.em.Len())
}

func TestDoDeadlineFailsFastWhenWaitWouldPassIt(t *testing.T) {
	f := newFixture(t, policy(3, time.Hour, 2*time.Hour), []float64{0.5})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) { return 0, io.EOF })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, io.EOF)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, retry.StopDeadline, re.Reason)
	require.Equal(t, time.Hour, re.RetryAfter)
	require.Empty(t, f.clk.Pending())
}

func TestDoRateLimitedHint(t *testing.T) {
	t.Run("clamped to max delay", func(t *testing.T) {
		f := newFixture(t, policy(3, time.Second, 10*time.Second), []float64{0.5})
		n := 0
		ch := start(context.Background(), f.mgr, func(context.Context) (int, error) {
			n++
			if n == 1 {
				return 0, retry.RateLimited(errors.New("429"), time.Hour)
			}
			return n, nil
		})
		f.expectWait(t, 10*time.Second)
		r := recv(t, ch)
		require.NoError(t, r.err)
		require.Equal(t, 2, r.v)
		require.InDelta(t, 10.0, f.em.Events()[0].DelaySeconds, 1e-9)
	})
	t.Run("hint used instead of backoff", func(t *testing.T) {
		f := newFixture(t, policy(3, time.Second, 10*time.Second), []float64{0.5})
		n := 0
		ch := start(context.Background(), f.mgr, func(context.Context) (int, error) {
			n++
			if n == 1 {
				return 0, fmt.Errorf("publish: %w", retry.RateLimited(errors.New("slow down"), 3*time.Second))
			}
			return n, nil
		})
		f.expectWait(t, 3*time.Second)
		require.NoError(t, recv(t, ch).err)
	})
	t.Run("hint beyond the deadline fails fast even when clamping would fit", func(t *testing.T) {
		f := newFixture(t, policy(3, time.Second, time.Minute), []float64{0.5})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		calls := 0
		_, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) {
			calls++
			return 0, retry.RateLimited(errors.New("quota"), 5*time.Minute)
		})
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, retry.StopDeadline, re.Reason)
		require.Equal(t, 5*time.Minute, re.RetryAfter)
		require.Equal(t, 1, calls)
		require.Empty(t, f.clk.Pending())
	})
	t.Run("longer than deadline fails fast with the hint", func(t *testing.T) {
		f := newFixture(t, policy(3, time.Second, time.Hour), []float64{0.5})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hinted := errors.New("busy")
		_, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) {
			return 0, retry.RateLimited(hinted, 5*time.Minute)
		})
		var re *retry.Error
		require.ErrorAs(t, err, &re)
		require.Equal(t, retry.StopDeadline, re.Reason)
		require.Equal(t, 5*time.Minute, re.RetryAfter)
		require.Equal(t, hinted, re.Cause)
		require.Contains(t, err.Error(), "retry after 5m0s")
	})
}

func TestDoMaxElapsed(t *testing.T) {
	p := policy(10, time.Second, 10*time.Second)
	p.JitterFactor = 0
	p.MaxElapsed = 2500 * time.Millisecond
	f := newFixture(t, p, nil)
	ch := start(context.Background(), f.mgr, func(context.Context) (int, error) { return 0, io.EOF })
	f.expectWait(t, time.Second)
	r := recv(t, ch) // at t=1s the next wait (2s) would end past 2.5s
	var re *retry.Error
	require.ErrorAs(t, r.err, &re)
	require.Equal(t, retry.StopElapsed, re.Reason)
	require.ErrorIs(t, r.err, retry.ErrExhausted)
	require.Equal(t, 2, re.Attempts)
	require.Equal(t, 2*time.Second, re.RetryAfter)
}

func TestDoAttemptTimeout(t *testing.T) {
	p := policy(3, 0, 0)
	p.AttemptTimeout = 20 * time.Millisecond
	f := newFixture(t, p, nil)
	n := 0
	v, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(ctx context.Context) (int, error) {
		n++
		if n == 1 {
			<-ctx.Done() // the attempt's own deadline, not the caller's
			return 0, ctx.Err()
		}
		_, hasDeadline := ctx.Deadline()
		require.True(t, hasDeadline)
		return n, nil
	})
	require.NoError(t, err)
	require.Equal(t, 2, v)
	events := f.em.Events()
	require.Len(t, events, 1)
	require.Equal(t, "context.DeadlineExceeded", events[0].ExceptionType)
}

func TestDoNotIdempotentWithoutKeyRunsOnce(t *testing.T) {
	f := newFixture(t, policy(5, 0, 0), nil)
	calls := 0
	_, err := retry.Do(context.Background(), f.mgr, testCat, "charge card", func(context.Context) (int, error) {
		calls++
		return 0, io.EOF
	}, retry.NotIdempotent())
	require.Equal(t, 1, calls)
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, retry.StopNotIdempotent, re.Reason)
	require.Equal(t, "not_idempotent", f.em.Events()[0].StopReason)
}

func TestDoUnknownCategoryUsesDefaultPolicy(t *testing.T) {
	one := policy(1, 0, 0)
	f := newFixture(t, policy(3, 0, 0), nil, retry.WithDefaultPolicy(one))
	count := func(cat retry.Category) int {
		calls := 0
		_, _ = retry.Do(context.Background(), f.mgr, cat, "op", func(context.Context) (int, error) {
			calls++
			return 0, io.EOF
		})
		return calls
	}
	require.Equal(t, 3, count(testCat))
	require.Equal(t, 1, count("RETRY_SOMETHING_NEW"))
	require.Equal(t, one, f.mgr.Policy("RETRY_SOMETHING_NEW"))

	m, err := retry.NewManager()
	require.NoError(t, err)
	require.Equal(t, retry.DefaultPolicy(), m.Policy("ANY"))
}

func TestDoPolicyOverride(t *testing.T) {
	f := newFixture(t, policy(5, 0, 0), nil)
	calls := 0
	_, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(context.Context) (int, error) {
		calls++
		return 0, io.EOF
	}, retry.WithPolicy(policy(2, 0, 0)))
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.Equal(t, 2, calls)
}

func TestDoRejectsBadInput(t *testing.T) {
	f := newFixture(t, policy(3, 0, 0), nil)
	fn := func(context.Context) (int, error) { t.Fatal("fn must not run"); return 0, nil }
	ctx := context.Background()
	tests := []struct {
		name string
		run  func() error
		want error
	}{
		{"nil manager", func() error { _, err := retry.Do(ctx, nil, testCat, "op", fn); return err }, retry.ErrInvalidOption},
		{"zero manager", func() error { _, err := retry.Do(ctx, &retry.Manager{}, testCat, "op", fn); return err }, retry.ErrInvalidOption},
		{"nil fn", func() error {
			_, err := retry.Do[int](ctx, f.mgr, testCat, "op", nil)
			return err
		}, retry.ErrInvalidOption},
		{"empty category", func() error { _, err := retry.Do(ctx, f.mgr, "", "op", fn); return err }, retry.ErrInvalidOption},
		{"invalid policy", func() error {
			_, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithPolicy(retry.Policy{}))
			return err
		}, retry.ErrInvalidPolicy},
		{"nil option", func() error { _, err := retry.Do(ctx, f.mgr, testCat, "op", fn, nil); return err }, retry.ErrInvalidOption},
		{"empty key", func() error {
			_, err := retry.Do(ctx, f.mgr, testCat, "op", fn, retry.WithIdempotencyKey(""))
			return err
		}, retry.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.run(), tt.want)
		})
	}
}

func TestNewManagerRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		opt  retry.ManagerOption
		want error
	}{
		{"nil option", nil, retry.ErrInvalidOption},
		{"invalid category policy", retry.WithPolicies(map[retry.Category]retry.Policy{"X": {}}), retry.ErrInvalidPolicy},
		{"empty category", retry.WithPolicies(map[retry.Category]retry.Policy{"": retry.DefaultPolicy()}), retry.ErrInvalidOption},
		{"invalid default", retry.WithDefaultPolicy(retry.Policy{MaxAttempts: 1, Multiplier: 0.1}), retry.ErrInvalidPolicy},
		{"zero lease", retry.WithLease(0), retry.ErrInvalidOption},
		{"nil emitter", retry.WithEmitter(nil), retry.ErrInvalidOption},
		{"nil store", retry.WithStore(nil), retry.ErrInvalidOption},
		{"nil clock", retry.WithClock(nil), retry.ErrInvalidOption},
		{"nil random", retry.WithRandom(nil), retry.ErrInvalidOption},
		{"nil logger", retry.WithLogger(nil), retry.ErrInvalidOption},
		{"nil tracer provider", retry.WithTracerProvider(nil), retry.ErrInvalidOption},
		{"nil meter provider", retry.WithMeterProvider(nil), retry.ErrInvalidOption},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := retry.NewManager(tt.opt)
			require.ErrorIs(t, err, tt.want)
			require.Nil(t, m)
		})
	}
}

// failingEmitter refuses every event.
type failingEmitter struct{ n atomic.Int64 }

func (e *failingEmitter) Emit(context.Context, audit.Event) error {
	e.n.Add(1)
	return errors.New("emitter down")
}

func TestDoAuditFailureDoesNotFailTheCall(t *testing.T) {
	em := &failingEmitter{}
	m, err := retry.NewManager(retry.WithEmitter(em), retry.WithDefaultPolicy(policy(2, 0, 0)))
	require.NoError(t, err)
	n := 0
	v, err := retry.Do(context.Background(), m, testCat, "op", func(context.Context) (int, error) {
		n++
		if n == 1 {
			return 0, io.EOF
		}
		return 7, nil
	})
	require.NoError(t, err)
	require.Equal(t, 7, v)
	require.Equal(t, int64(1), em.n.Load())
}

func TestDoConcurrentUse(t *testing.T) {
	em := &audit.Memory{}
	m, err := retry.NewManager(retry.WithEmitter(em), retry.WithDefaultPolicy(policy(3, 0, 0)))
	require.NoError(t, err)
	var wg sync.WaitGroup
	var ok, failed, runs atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				n := 0
				_, err := retry.Do(context.Background(), m, testCat, "op", func(ctx context.Context) (int, error) {
					runs.Add(1)
					n++
					a, _ := retry.AttemptFrom(ctx)
					if a.Number != n {
						return 0, retry.Permanent(fmt.Errorf("attempt %d, want %d", a.Number, n))
					}
					if (g+i+n)%3 != 0 {
						return 0, io.EOF
					}
					return n, nil
				})
				if err != nil {
					require.ErrorIs(t, err, retry.ErrExhausted)
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(32*50), ok.Load()+failed.Load())
	// Every failed attempt that was retried and every failed call is audited.
	attempts := len(em.Filter(func(e audit.Event) bool { return e.Type == audit.TypeRetryAttempt }))
	exhausted := len(em.Filter(func(e audit.Event) bool { return e.Type == audit.TypeRetryExhausted }))
	require.Equal(t, int(failed.Load()), exhausted)
	require.Equal(t, int(runs.Load()-ok.Load()-failed.Load()), attempts)
}
