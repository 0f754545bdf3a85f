package bench

import "testing"

// benchGroup runs the cases of group as sub-benchmarks named after them.
func benchGroup(b *testing.B, group string) {
	b.Helper()
	for _, c := range Cases() {
		if c.Group == group {
			b.Run(c.Name, c.Bench)
		}
	}
}

// BenchmarkSuccess: the operation succeeds at once. raw is a plain call.
func BenchmarkSuccess(b *testing.B) { benchGroup(b, GroupSuccess) }

// BenchmarkOneRetry: the operation fails once, then succeeds, with no wait
// between the attempts.
func BenchmarkOneRetry(b *testing.B) { benchGroup(b, GroupOneRetry) }

// BenchmarkIdempotentMemory: jetretry with the memory idempotency store
// and a fresh key per call (claim, run, complete).
func BenchmarkIdempotentMemory(b *testing.B) { benchGroup(b, GroupIdempotentMemory) }

// TestOneRetryCallsTwice checks every OneRetry case really retries once.
func TestOneRetryCallsTwice(t *testing.T) {
	for _, c := range Cases() {
		if c.Verify == nil {
			continue
		}
		t.Run(c.Group+"/"+c.Name, func(t *testing.T) {
			if err := c.Verify(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func BenchmarkNATS(b *testing.B) {
	for _, c := range natsCases() {
		b.Run(c.Group+"/"+c.Name, c.Bench)
	}
}

func BenchmarkJobs(b *testing.B) {
	for _, c := range jobsCases() {
		b.Run(c.Group+"/"+c.Name, c.Bench)
	}
}
