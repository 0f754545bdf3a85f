package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jetretry/jetretry/retry"
)

func BenchmarkDo(b *testing.B) {
	m, err := retry.NewManager(retry.WithDefaultPolicy(retry.Policy{MaxAttempts: 3, Multiplier: 1}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("success", func(b *testing.B) {
		b.ReportAllocs()
		fn := func(context.Context) (int, error) { return 1, nil }
		for b.Loop() {
			if _, err := retry.Do(ctx, m, testCat, "op", fn); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one_retry", func(b *testing.B) {
		b.ReportAllocs()
		errFlaky := errors.New("flaky")
		for b.Loop() {
			n := 0
			if _, err := retry.Do(ctx, m, testCat, "op", func(context.Context) (int, error) {
				n++
				if n == 1 {
					return 0, errFlaky
				}
				return n, nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
