package natsx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/natsx"
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

	// Seed 002's policies, with audit events kept in memory.
	var events audit.Memory
	mgr, err := categories.NewManager(retry.WithEmitter(&events))
	if err != nil {
		log.Fatal(err)
	}

	// Connect under NATS_CONNECT. An empty URL would mean $NATS_URL.
	nc, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: url, Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	c, err := natsx.New(nc, mgr)
	if err != nil {
		log.Fatal(err)
	}

	// A service, subscribed under NATS_SUBSCRIBE, and a request to it
	// under API_REQUEST.
	_, err = c.Subscribe(ctx, "greet.*", func(m *nats.Msg) {
		_ = m.Respond([]byte("hello, " + m.Subject[len("greet."):]))
	})
	if err != nil {
		log.Fatal(err)
	}
	reply, err := c.Request(ctx, "greet.gopher", nil, retry.WithTenant("tenant-1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(reply.Data))

	// A stream under NATS_STREAM_CREATE, and a JetStream publish under
	// NATS_PUBLISH whose retries the stream deduplicates.
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateStream(ctx, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		log.Fatal(err)
	}
	ack, err := c.JetStreamPublish(ctx, js, "orders.created", []byte(`{"id":1}`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored as", ack.Stream, ack.Sequence)

	// A bad subject is refused at once, without an attempt.
	err = c.Publish(ctx, "orders.*", nil)
	fmt.Println(err, retry.IsPermanent(err))
	fmt.Println("audit events:", events.Len())
	// Output:
	// hello, gopher
	// stored as ORDERS 1
	// natsx: publish orders.*: nats: invalid subject: "orders.*" contains a wildcard true
	// audit events: 0
}

func ExampleClassify() {
	for _, err := range []error{nats.ErrTimeout, nats.ErrAuthorization, jetstream.ErrStreamNameAlreadyInUse} {
		c := natsx.Classify(err)
		fmt.Printf("%-38s permanent=%v\n", retry.ErrorType(c), retry.IsPermanent(c))
	}
	// Output:
	// nats.ErrTimeout                        permanent=false
	// nats.ErrAuthorization                  permanent=true
	// jetstream.ErrStreamNameAlreadyInUse    permanent=true
}

func ExampleConnect_retries() {
	// A server that is not up: Connect retries under NATS_CONNECT and
	// audits each retry. Short delays keep the example fast.
	url, stop := startServer()
	stop()
	var events audit.Memory
	fast := retry.Policy{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, Multiplier: 2}
	mgr, err := categories.NewManager(retry.WithEmitter(&events),
		retry.WithPolicies(map[retry.Category]retry.Policy{categories.NATSConnect: fast}))
	if err != nil {
		log.Fatal(err)
	}
	_, err = natsx.Connect(context.Background(), mgr, natsx.ConnectConfig{URL: url})
	var re *retry.Error
	if errors.As(err, &re) {
		fmt.Println(re.Reason, re.Attempts)
	}
	for _, e := range events.Events() {
		fmt.Println(e.Type, e.Category, e.ExceptionType+e.FinalExceptionType)
	}
	// Output:
	// exhausted 3
	// retry_attempt RETRY_NATS_CONNECT nats.ErrNoServers
	// retry_attempt RETRY_NATS_CONNECT nats.ErrNoServers
	// retry_exhausted RETRY_NATS_CONNECT nats.ErrNoServers
}
