package idempotency_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/idempotency/storetest"
	"github.com/jetretry/jetretry/internal/natstest"
)

// bucketSeq numbers buckets so that every store in a test run is isolated.
var bucketSeq atomic.Int64

func freshBucket() string { return fmt.Sprintf("IDEM_TEST_%d", bucketSeq.Add(1)) }

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newKV returns a KV store on a fresh bucket of s.
func newKV(t *testing.T, js jetstream.JetStream, cfg idempotency.KVConfig) *idempotency.KV {
	t.Helper()
	if cfg.Bucket == "" {
		cfg.Bucket = freshBucket()
	}
	kv, err := idempotency.NewKV(testCtx(t), js, cfg)
	require.NoError(t, err)
	return kv
}

func TestKVConformance(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) idempotency.Store {
		return newKV(t, js, idempotency.KVConfig{Now: now, Storage: jetstream.MemoryStorage})
	})
}
