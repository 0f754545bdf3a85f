package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
)

const demoUsage = `Usage: jetretry demo [--duration D] [--rate N] [--seed S] [--workers W]

Drives a flaky workload through all 17 retry categories: transient
failures, permanent failures, rate-limit hints, idempotent duplicates
(cache hits) and exhaustion. Each category keeps its seed 002 attempt
count; delays are scaled down 1000x so a run takes seconds. It ends with a
per-category table computed from the audit events the run emitted.

This version runs in process with the in-memory audit emitter and
idempotency store. The JetStream-backed demo (embedded nats-server, audit
stream read back) arrives with the NATS layer.

Examples:
  jetretry demo
  jetretry demo --duration 5s --rate 500 --seed 7
`

func runDemo(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("demo", demoUsage, stdout)
	duration := fs.Duration("duration", 3*time.Second, "how long to generate work")
	rate := fs.Int("rate", 300, "operations started per second")
	seed := fs.Uint64("seed", 1, "random seed: the same seed gives the same workload")
	workers := fs.Int("workers", 16, "concurrent workers")
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case *duration <= 0:
		return usagef("--duration must be positive")
	case *rate <= 0:
		return usagef("--rate must be positive")
	case *workers <= 0:
		return usagef("--workers must be positive")
	}

	events := &audit.Memory{}
	policies := categories.Defaults()
	for c, p := range policies {
		p.BaseDelay /= 1000
		p.MaxDelay /= 1000
		policies[c] = p
	}
	mgr, err := retry.NewManager(retry.WithPolicies(policies), retry.WithEmitter(events),
		retry.WithStore(idempotency.NewMemory(nil, 0)))
	if err != nil {
		return err
	}

	total := int(duration.Seconds() * float64(*rate))
	if total < len(categories.All()) {
		total = len(categories.All())
	}
	ops := planWorkload(total, *seed)
	live := isTerminal(stdout)
	fmt.Fprintf(stdout, "jetretry demo: %d operations over %v across %d categories (seed %d)\n",
		total, *duration, len(categories.All()), *seed)

	var done, failed atomic.Int64
	jobs := make(chan demoOp)
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for op := range jobs {
				if err := op.run(ctx, mgr); err != nil {
					failed.Add(1)
				}
				done.Add(1)
			}
		}()
	}
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				line := fmt.Sprintf("progress: %d/%d operations, %d failed, %d audit events",
					done.Load(), total, failed.Load(), events.Len())
				if live {
					fmt.Fprintf(stdout, "\r%s", line)
				} else {
					fmt.Fprintln(stdout, line)
				}
			case <-progressDone:
				return
			}
		}
	}()

	interval := time.Duration(float64(time.Second) / float64(*rate))
	tick := time.NewTicker(interval)
feed:
	for _, op := range ops {
		select {
		case <-ctx.Done():
			break feed
		case <-tick.C:
		}
		select {
		case jobs <- op:
		case <-ctx.Done():
			break feed
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	progressDone <- struct{}{}
	<-progressDone
	if live {
		fmt.Fprintln(stdout)
	}
	fmt.Fprintf(stdout, "done: %d operations, %d failed\n\n", done.Load(), failed.Load())
	return printDemoStats(stdout, events.Events())
}

// demoOp is one planned operation.
type demoOp struct {
	cat      retry.Category
	kind     string // ok, transient, permanent, ratelimited, exhaust, duplicate (run twice)
	failures int    // for transient: failures before success
	key      string // for duplicate
}

// planWorkload draws a reproducible workload.
func planWorkload(n int, seed uint64) []demoOp {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cats := categories.All()
	defaults := categories.Defaults()
	ops := make([]demoOp, 0, n)
	for i := 0; i < n; i++ {
		c := cats[i%len(cats)]
		op := demoOp{cat: c}
		switch x := r.IntN(100); {
		case x < 50:
			op.kind = "ok"
		case x < 72:
			op.kind = "transient"
			op.failures = 1 + r.IntN(max(defaults[c].MaxAttempts-1, 1))
		case x < 80:
			op.kind = "permanent"
		case x < 86:
			op.kind = "ratelimited"
		case x < 92:
			op.kind = "exhaust"
		default:
			op.kind = "duplicate"
			op.key, _ = idempotency.Key("demo."+string(c), "tenant-demo", "corr-"+strconv.Itoa(i), nil)
		}
		ops = append(ops, op)
	}
	return ops
}

var errDemoTransient = errors.New("simulated transient failure")

func (op demoOp) run(ctx context.Context, mgr *retry.Manager) error {
	n := 0
	fn := func(ctx context.Context) (string, error) {
		n++
		switch op.kind {
		case "transient":
			if n <= op.failures {
				return "", errDemoTransient
			}
		case "permanent":
			return "", retry.Permanent(errors.New("simulated invalid request"))
		case "ratelimited":
			if n == 1 {
				return "", retry.RateLimited(errors.New("simulated 429"), 2*time.Millisecond)
			}
		case "exhaust":
			return "", errDemoTransient
		}
		return "ok", nil
	}
	opts := []retry.Option{retry.WithTenant("tenant-demo"), retry.WithCorrelation(op.kind)}
	if op.key != "" {
		opts = append(opts, retry.WithIdempotencyKey(op.key))
	}
	_, err := retry.Do(ctx, mgr, op.cat, "demo "+op.kind, fn, opts...)
	if err != nil || op.key == "" {
		return err
	}
	// The duplicate delivery of the same request: served from the store.
	_, err = retry.Do(ctx, mgr, op.cat, "demo "+op.kind, fn, opts...)
	return err
}

// demoStats is the per-category analysis of seed 002's "Retry Pattern
// Analysis", computed from audit events only.
type demoStats struct {
	attempts, exhausted, retried, hits, records int
	retriedAttempts                             int
}

func printDemoStats(w io.Writer, events []audit.Event) error {
	stats := map[string]*demoStats{}
	for _, c := range categories.All() {
		stats[string(c)] = &demoStats{}
	}
	for _, e := range events {
		s := stats[e.Category]
		if s == nil {
			s = &demoStats{}
			stats[e.Category] = s
		}
		switch e.Type {
		case audit.TypeRetryAttempt:
			s.attempts++
			if e.AttemptNumber == 1 {
				s.retried++
			}
		case audit.TypeRetryExhausted:
			s.exhausted++
		case audit.TypeIdempotency:
			switch e.Action {
			case audit.ActionHit:
				s.hits++
			case audit.ActionRecord:
				s.records++
			}
		}
	}
	names := make([]string, 0, len(stats))
	for n := range stats {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tRETRY_ATTEMPT\tRETRY_EXHAUSTED\tIDEM_HITS\tIDEM_RECORDS")
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", n, s.attempts, s.exhausted, s.hits, s.records)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%d audit events in all (retry_attempt, retry_exhausted, idempotency).\n", len(events))
	return err
}

// isTerminal reports whether w is a terminal, for live progress.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
