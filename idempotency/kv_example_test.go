package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/idempotency"
)

func ExampleNewKV() {
	// An embedded JetStream server; use your own with nats.Connect.
	dir, _ := os.MkdirTemp("", "jetretry-example")
	defer os.RemoveAll(dir)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		fmt.Println("server not ready")
		return
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)

	ctx := context.Background()
	store, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{}) // bucket JETRETRY_IDEMPOTENCY, 24h retention
	if err != nil {
		fmt.Println(err)
		return
	}
	key, _ := idempotency.Key("create_order", "tenant-123", "corr-456", map[string]any{"sku": "A-1"})

	c, err := store.Claim(ctx, key, "fp", 30*time.Second)
	fmt.Println(c.Status, err)
	_, err = store.Claim(ctx, key, "fp", 30*time.Second)
	fmt.Println(errors.Is(err, idempotency.ErrInProgress))
	fmt.Println(store.Complete(ctx, c, []byte(`{"order_id":"o-1"}`)))
	hit, err := store.Claim(ctx, key, "fp", 30*time.Second)
	fmt.Println(hit.Status, string(hit.Result), err)
	// Output:
	// claimed <nil>
	// true
	// <nil>
	// completed {"order_id":"o-1"} <nil>
}
