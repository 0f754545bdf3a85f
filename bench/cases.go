package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	retrygo "github.com/avast/retry-go/v5"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"

	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
)

// Group names.
const (
	GroupSuccess          = "Success"
	GroupOneRetry         = "OneRetry"
	GroupIdempotentMemory = "IdempotentMemory"
)

// Case names. Jetretry is the reference the other cases are compared to;
// Raw is a plain function call.
const (
	Raw      = "raw"
	Jetretry = "jetretry"
	Failsafe = "failsafe"
	Backoff  = "backoff"
	Retrygo  = "retrygo"

	// The -ctx cases use each peer the way a request handler must: with
	// the request's context bound per call and the attempt number visible
	// to the operation, as jetretry always provides. failsafe needs
	// WithContext and GetWithExecution; retry-go binds the context when a
	// retrier is built, so a per-request context means a retrier per call.
	FailsafeCtx = "failsafe-ctx"
	RetrygoCtx  = "retrygo-ctx"
)

// Case is one benchmark: Bench/Group/Name.
type Case struct {
	Group string
	Name  string
	// Bench is the benchmark body. It calls Verify, if any, before
	// starting the timer, and fails when Verify does.
	Bench func(b *testing.B)
	// Verify, when not nil, runs the case once and checks it does what it
	// claims (for OneRetry: exactly two calls of the operation).
	Verify func() error
}

// Cases returns every case, grouped, in the order they are reported.
func Cases() []Case {
	return []Case{
		{GroupSuccess, Raw, benchSuccessRaw, nil},
		{GroupSuccess, Jetretry, benchSuccessJetretry, nil},
		{GroupSuccess, Failsafe, benchSuccessFailsafe, nil},
		{GroupSuccess, Backoff, benchSuccessBackoff, nil},
		{GroupSuccess, Retrygo, benchSuccessRetrygo, nil},
		{GroupSuccess, FailsafeCtx, benchSuccessFailsafeCtx, nil},
		{GroupSuccess, RetrygoCtx, benchSuccessRetrygoCtx, nil},
		oneRetry(Jetretry, newOneRetryJetretry),
		oneRetry(Failsafe, newOneRetryFailsafe),
		oneRetry(Backoff, newOneRetryBackoff),
		oneRetry(Retrygo, newOneRetryRetrygo),
		oneRetry(FailsafeCtx, newOneRetryFailsafeCtx),
		oneRetry(RetrygoCtx, newOneRetryRetrygoCtx),
		{GroupIdempotentMemory, Jetretry, benchIdempotentMemoryJetretry, nil},
	}
}

// AllCases returns Cases followed by the cases that run against an
// embedded nats-server.
func AllCases() []Case {
	return append(append(Cases(), natsCases()...), jobsCases()...)
}

// Every library gets the same policy: three attempts, no wait.
const attempts = 3

var (
	category = retry.Category("RETRY_BENCH")
	errFlaky = errors.New("bench: transient failure")

	// sink keeps results alive so the compiler cannot drop the calls.
	sink int
)

// zeroPolicy is jetretry's policy: three attempts, no delay, no jitter.
func zeroPolicy() retry.Policy {
	return retry.Policy{MaxAttempts: attempts, Multiplier: 1, Jitter: retry.JitterNone}
}

func newJetretry(opts ...retry.ManagerOption) (*retry.Manager, error) {
	return retry.NewManager(append([]retry.ManagerOption{retry.WithDefaultPolicy(zeroPolicy())}, opts...)...)
}

func newFailsafe() failsafe.Executor[int] {
	return failsafe.With[int](retrypolicy.NewBuilder[int]().WithMaxAttempts(attempts).WithDelay(0).Build())
}

func backoffOptions() []backoff.RetryOption {
	return []backoff.RetryOption{backoff.WithBackOff(&backoff.ZeroBackOff{}), backoff.WithMaxTries(attempts)}
}

func newRetrygo(ctx context.Context) *retrygo.RetrierWithData[int] {
	return retrygo.NewWithData[int](
		retrygo.Context(ctx),
		retrygo.Attempts(attempts),
		retrygo.Delay(0),
		retrygo.MaxJitter(0),
		retrygo.DelayType(retrygo.FixedDelay),
	)
}

// The operations are package functions that are never inlined, so every
// case pays for a real call.

//go:noinline
func succeed() (int, error) { return 42, nil }

//go:noinline
func succeedCtx(context.Context) (int, error) { return 42, nil }

// Success: the operation succeeds at once.

func benchSuccessRaw(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v, _ := succeed()
		sink += v
	}
}

func benchSuccessJetretry(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	m, err := newJetretry()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := retry.Do(ctx, m, category, "op", succeedCtx)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

func benchSuccessFailsafe(b *testing.B) {
	b.ReportAllocs()
	e := newFailsafe()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := e.Get(succeed)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

func benchSuccessBackoff(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	opts := backoffOptions()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := backoff.Retry(ctx, succeed, opts...)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

func benchSuccessRetrygo(b *testing.B) {
	b.ReportAllocs()
	r := newRetrygo(context.Background())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := r.Do(succeed)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

//go:noinline
func succeedExec(exec failsafe.Execution[int]) (int, error) {
	sink += exec.Attempts()
	return 42, nil
}

func benchSuccessFailsafeCtx(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	e := newFailsafe()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := e.WithContext(ctx).GetWithExecution(succeedExec)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

func benchSuccessRetrygoCtx(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := newRetrygo(ctx).Do(succeed)
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}

// OneRetry: the operation fails once with a plain error, then succeeds.

// flaky is an operation that fails on the first call after a reset.
type flaky struct {
	calls int // since the last reset
	total int
}

func (f *flaky) call() (int, error) {
	f.calls++
	f.total++
	if f.calls == 1 {
		return 0, errFlaky
	}
	return 42, nil
}

func (f *flaky) callCtx(context.Context) (int, error) { return f.call() }

// oneRetryRunner builds a library's runner for the flaky operation f.
// The runner makes one retried call.
type oneRetryRunner func(f *flaky) (func() (int, error), error)

func newOneRetryJetretry(f *flaky) (func() (int, error), error) {
	ctx := context.Background()
	m, err := newJetretry()
	if err != nil {
		return nil, err
	}
	op := f.callCtx
	return func() (int, error) { return retry.Do(ctx, m, category, "op", op) }, nil
}

func newOneRetryFailsafe(f *flaky) (func() (int, error), error) {
	e, op := newFailsafe(), f.call
	return func() (int, error) { return e.Get(op) }, nil
}

func newOneRetryBackoff(f *flaky) (func() (int, error), error) {
	ctx, opts, op := context.Background(), backoffOptions(), f.call
	return func() (int, error) { return backoff.Retry(ctx, op, opts...) }, nil
}

func newOneRetryRetrygo(f *flaky) (func() (int, error), error) {
	r, op := newRetrygo(context.Background()), f.call
	return func() (int, error) { return r.Do(op) }, nil
}

func newOneRetryFailsafeCtx(f *flaky) (func() (int, error), error) {
	ctx, e := context.Background(), newFailsafe()
	op := func(exec failsafe.Execution[int]) (int, error) {
		sink += exec.Attempts()
		return f.call()
	}
	return func() (int, error) { return e.WithContext(ctx).GetWithExecution(op) }, nil
}

func newOneRetryRetrygoCtx(f *flaky) (func() (int, error), error) {
	ctx, op := context.Background(), f.call
	return func() (int, error) { return newRetrygo(ctx).Do(op) }, nil
}

// verifyOneRetry runs one call and checks the operation ran exactly twice
// and the call succeeded.
func verifyOneRetry(newRunner oneRetryRunner) error {
	f := new(flaky)
	run, err := newRunner(f)
	if err != nil {
		return err
	}
	v, err := run()
	switch {
	case err != nil:
		return fmt.Errorf("bench: call failed: %w", err)
	case v != 42:
		return fmt.Errorf("bench: got result %d, want 42", v)
	case f.calls != 2:
		return fmt.Errorf("bench: the operation ran %d times, want 2", f.calls)
	}
	return nil
}

func oneRetry(name string, newRunner oneRetryRunner) Case {
	verify := func() error { return verifyOneRetry(newRunner) }
	return Case{
		Group:  GroupOneRetry,
		Name:   name,
		Verify: verify,
		Bench: func(b *testing.B) {
			b.ReportAllocs()
			if err := verify(); err != nil {
				b.Fatal(err)
			}
			f := new(flaky)
			run, err := newRunner(f)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				f.calls = 0
				v, err := run()
				if err != nil {
					b.Fatal(err)
				}
				sink += v
			}
			b.StopTimer()
			if f.total != 2*b.N {
				b.Fatalf("the operation ran %d times in %d calls, want %d", f.total, b.N, 2*b.N)
			}
		},
	}
}

// IdempotentMemory: jetretry with the memory idempotency store and a fresh
// key per call, so every call claims the key and records the result.

func benchIdempotentMemoryJetretry(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	m, err := newJetretry(retry.WithStore(idempotency.NewMemory(nil, 0)))
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = "bench-" + strconv.Itoa(i)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v, err := retry.Do(ctx, m, category, "op", succeedCtx, retry.WithIdempotencyKey(keys[i]))
		if err != nil {
			b.Fatal(err)
		}
		sink += v
	}
}
