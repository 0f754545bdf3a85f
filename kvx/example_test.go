package kvx_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/kvx"
	"github.com/jetretry/jetretry/retry"
)

// startServer starts an embedded JetStream server for the example.
func startServer() (url string, stop func()) {
	url, stop, err := natstest.StartExample()
	if err != nil {
		log.Fatal(err)
	}
	return url, stop
}

func Example() {
	url, stop := startServer()
	defer stop()
	ctx := context.Background()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}

	var events audit.Memory
	mgr, err := categories.NewManager(retry.WithEmitter(&events))
	if err != nil {
		log.Fatal(err)
	}

	// KV_CREATE: declare the bucket.
	kv, err := kvx.CreateBucket(ctx, mgr, js, jetstream.KeyValueConfig{Bucket: "switches", History: 5})
	if err != nil {
		log.Fatal(err)
	}

	// KV_GET: a missing key is an answer, not a failure.
	_, err = kvx.Get(ctx, mgr, kv, "kill", retry.WithTenant("tenant-1"))
	fmt.Println("missing:", errors.Is(err, jetstream.ErrKeyNotFound))

	// KV_PUT: create the key, then compare-and-set it.
	rev, err := kvx.Create(ctx, mgr, kv, "kill", []byte("off"))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := kvx.Update(ctx, mgr, kv, "kill", []byte("on"), rev); err != nil {
		log.Fatal(err)
	}
	// A stale revision is a conflict, and is not retried.
	_, err = kvx.Update(ctx, mgr, kv, "kill", []byte("off"), rev)
	fmt.Println("conflict:", errors.Is(err, jetstream.ErrKeyRevisionMismatch))

	e, err := kvx.Get(ctx, mgr, kv, "kill")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("kill =", string(e.Value()))

	// KV_DELETE.
	if err := kvx.Delete(ctx, mgr, kv, "kill"); err != nil {
		log.Fatal(err)
	}

	for _, ev := range events.Events() {
		fmt.Println(ev.Type, ev.Category, ev.StopReason, ev.FinalExceptionType)
	}
	// Output:
	// missing: true
	// conflict: true
	// kill = on
	// retry_exhausted RETRY_KV_PUT permanent jetstream.ErrKeyRevisionMismatch
}
