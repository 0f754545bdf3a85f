package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
)

// Do retries a flaky call under its category's policy. The audit emitter
// receives a retry_attempt event for each failed attempt that is retried.
func ExampleDo() {
	events := &audit.Memory{}
	mgr, err := categories.NewManager(
		retry.WithEmitter(events),
		// Short delays for the example; the seed 002 matrix waits 0.5 s.
		retry.WithPolicies(map[retry.Category]retry.Policy{categories.KVGet: {
			MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond, Multiplier: 2,
		}}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	status, err := retry.Do(context.Background(), mgr, categories.KVGet, "Get kill switch status",
		func(ctx context.Context) (string, error) {
			calls++
			a, _ := retry.AttemptFrom(ctx)
			if a.Number < 3 {
				return "", errors.New("KV operation timeout")
			}
			return "armed", nil
		},
		retry.WithTenant("tenant-123"), retry.WithCorrelation("corr-456"))
	fmt.Println(status, err, calls)
	for _, e := range events.Events() {
		fmt.Println(e.Type, e.Category, "attempt", e.AttemptNumber, "of", e.MaxAttempts, e.ExceptionMessage)
	}
	// Output:
	// armed <nil> 3
	// retry_attempt RETRY_KV_GET attempt 1 of 3 KV operation timeout
	// retry_attempt RETRY_KV_GET attempt 2 of 3 KV operation timeout
}

// A custom policy: few attempts, full jitter, and errors that must not be
// retried. Permanent marks one error as final whatever the policy says.
func ExamplePolicy() {
	errInvalid := errors.New("invalid input")
	p := retry.Policy{
		MaxAttempts:  4,
		BaseDelay:    0,
		MaxDelay:     0,
		Multiplier:   2,
		Jitter:       retry.JitterFull,
		NonRetryable: []retry.Matcher{retry.Is(errInvalid)},
	}
	if err := p.Validate(); err != nil {
		fmt.Println(err)
		return
	}
	mgr, err := retry.NewManager()
	if err != nil {
		fmt.Println(err)
		return
	}
	calls := 0
	_, err = retry.Do(context.Background(), mgr, categories.APIValidation, "validate order",
		func(context.Context) (int, error) {
			calls++
			return 0, fmt.Errorf("field qty: %w", errInvalid)
		}, retry.WithPolicy(p))
	fmt.Println(calls, errors.Is(err, errInvalid), errors.Is(err, retry.ErrExhausted))
	fmt.Println(err)

	bad := retry.Policy{MaxAttempts: 3, Multiplier: 0.5}
	fmt.Println(bad.Validate())
	// Output:
	// 1 true false
	// retry: RETRY_API_VALIDATION validate order: permanent after 1 attempt: field qty: invalid input
	// retry: invalid policy: Multiplier must be a finite number at least 1, got 0.5
}

// With an idempotency key, a repeated request returns the recorded result
// instead of running the side effect again.
func ExampleWithIdempotencyKey() {
	mgr, err := retry.NewManager(retry.WithStore(idempotency.NewMemory(nil, 0)))
	if err != nil {
		fmt.Println(err)
		return
	}
	key, err := idempotency.Key("charge_card", "tenant-123", "order-77", map[string]any{"amount_cents": 4200})
	if err != nil {
		fmt.Println(err)
		return
	}
	charges := 0
	charge := func(context.Context) (string, error) {
		charges++
		return fmt.Sprintf("receipt-%d", charges), nil
	}
	for i := 0; i < 3; i++ {
		receipt, err := retry.Do(context.Background(), mgr, categories.ExecutionIntent, "charge card", charge,
			retry.WithIdempotencyKey(key), retry.NotIdempotent())
		fmt.Println(receipt, err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// receipt-1 <nil>
	// receipt-1 <nil>
	// receipt-1 <nil>
	// charges: 1
}
