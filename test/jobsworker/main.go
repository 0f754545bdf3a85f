// Command jobsworker runs a jobs.Worker for the crash test: it serves one
// queue on a server and, for the job named by -block, prints "blocked
// <run_id>" and blocks forever, so the test can kill it mid-handler.
// Other jobs succeed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/jobs"
)

func main() {
	url := flag.String("server", "", "NATS URL")
	queue := flag.String("queue", "q", "queue")
	block := flag.String("block", "", "job key whose handler blocks")
	lease := flag.Duration("lease", 2*time.Second, "lease")
	flag.Parse()
	if err := run(*url, *queue, *block, *lease); err != nil {
		fmt.Fprintln(os.Stderr, "jobsworker:", err)
		os.Exit(1)
	}
}

func run(url, queue, block string, lease time.Duration) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx := context.Background()
	c, err := jobs.New(ctx, js, jobs.Config{})
	if err != nil {
		return err
	}
	w, err := jobs.NewWorker(c, queue, func(ctx context.Context, j *jobs.Job) error {
		if j.Key == block {
			fmt.Printf("blocked %s %d\n", j.RunID, j.Attempt)
			select {}
		}
		return nil
	}, jobs.WorkerConfig{Lease: lease})
	if err != nil {
		return err
	}
	return w.Run(ctx)
}
