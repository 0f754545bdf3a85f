package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

// A job that fails once with a retryable error, is retried after its
// backoff (held by the server as a message schedule), and succeeds.
func Example() {
	url, stop, err := natstest.StartExample()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := jobs.New(ctx, js, jobs.Config{})
	if err != nil {
		log.Fatal(err)
	}
	// A short policy for the example; the default is seed 004's (8
	// attempts, 60 s, ×2, 3600 s).
	policy := retry.Policy{MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: time.Second, Multiplier: 1, Jitter: retry.JitterNone}
	done := make(chan jobs.Record, 1)
	w, err := jobs.NewWorker(c, "reports", func(ctx context.Context, j *jobs.Job) error {
		fmt.Printf("run %d of %s\n", j.Attempt, j.Key)
		if j.Attempt == 1 {
			return errors.New("upstream timeout") // retryable: backs off
		}
		return nil
	}, jobs.WorkerConfig{Concurrency: 2, Policy: &policy, OnOutcome: func(r jobs.Record) {
		if r.Status == jobs.StatusSuccess {
			done <- r
		}
	}})
	if err != nil {
		log.Fatal(err)
	}

	_, created, err := c.Submit(ctx, "reports", "source/customer/query/2026-11-20", []byte(`{"day":"2026-11-20"}`), jobs.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created:", created)
	// Submitting the key again does not create a second job.
	_, created, err = c.Submit(ctx, "reports", "source/customer/query/2026-11-20", nil, jobs.SubmitOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("created again:", created)

	go func() { _ = w.Run(ctx) }()

	select {
	case r := <-done:
		fmt.Println("status:", r.Status, "attempts:", r.AttemptCount, "budget used:", r.BudgetUsed)
		for _, run := range r.History {
			fmt.Println("run", run.Attempt, run.Outcome, run.ErrorClass)
		}
	case <-ctx.Done():
		log.Fatal("the job did not finish")
	}
	// Output:
	// created: true
	// created again: false
	// run 1 of source/customer/query/2026-11-20
	// run 2 of source/customer/query/2026-11-20
	// status: success attempts: 2 budget used: 1
	// run 1 failed retryable
	// run 2 success
}

// A pending job whose dispatch is lost (here purged from the work stream;
// in life, a control call that died between its two writes) is found by
// Sweep and dispatched again.
func ExampleClient_Sweep() {
	url, stop, err := natstest.StartExample()
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	nc, err := nats.Connect(url)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := jobs.New(ctx, js, jobs.Config{})
	if err != nil {
		log.Fatal(err)
	}

	if _, _, err := c.Submit(ctx, "exports", "export/2026-11-21", nil, jobs.SubmitOptions{}); err != nil {
		log.Fatal(err)
	}
	work, err := js.Stream(ctx, jobs.DefaultStream)
	if err != nil {
		log.Fatal(err)
	}
	if err := work.Purge(ctx, jetstream.WithPurgeSubject(jobs.RunSubject("exports"))); err != nil {
		log.Fatal(err)
	}

	time.Sleep(1200 * time.Millisecond) // past the grace below
	stranded, err := c.Sweep(ctx, jobs.SweepOptions{Queue: "exports", Grace: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range stranded {
		fmt.Println("dispatched again:", r.Key, r.Status)
	}

	done := make(chan jobs.Record, 1)
	w, err := jobs.NewWorker(c, "exports", func(context.Context, *jobs.Job) error { return nil },
		jobs.WorkerConfig{OnOutcome: func(r jobs.Record) { done <- r }})
	if err != nil {
		log.Fatal(err)
	}
	go func() { _ = w.Run(ctx) }()
	r := <-done
	fmt.Println(r.Key, r.Status, "attempts:", r.AttemptCount)
	// Output:
	// dispatched again: export/2026-11-21 pending
	// export/2026-11-21 success attempts: 1
}
