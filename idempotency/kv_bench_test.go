package idempotency_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/internal/natstest"
)

// BenchmarkKVClaimComplete measures the store's round trips on an
// embedded server: a claim and completion of a fresh key (two writes), and
// a hit on a completed key (a failed create and a read).
func BenchmarkKVClaimComplete(b *testing.B) {
	s := natstest.Start(b)
	_, js := s.JetStream(b)
	ctx := context.Background()
	result := []byte(`{"id":"o-1","total":99}`)
	for _, st := range []struct {
		name    string
		storage jetstream.StorageType
	}{{"file", jetstream.FileStorage}, {"memory", jetstream.MemoryStorage}} {
		kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: "BENCH_" + st.name, Storage: st.storage})
		if err != nil {
			b.Fatal(err)
		}
		b.Run("claim+complete/"+st.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c, err := kv.Claim(ctx, st.name+"-"+strconv.Itoa(i), "fp", time.Minute)
				if err != nil {
					b.Fatal(err)
				}
				if err := kv.Complete(ctx, c, result); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("hit/"+st.name, func(b *testing.B) {
			c, err := kv.Claim(ctx, "hot", "fp", time.Minute)
			if err != nil {
				b.Fatal(err)
			}
			if err := kv.Complete(ctx, c, result); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				hit, err := kv.Claim(ctx, "hot", "fp", time.Minute)
				if err != nil || hit.Status != idempotency.Completed {
					b.Fatal(hit.Status, err)
				}
			}
		})
	}
}
