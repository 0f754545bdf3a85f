package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SweepOptions configure Sweep.
type SweepOptions struct {
	// Queue limits the sweep to one queue. Default: every queue.
	Queue string
	// Grace is how long past its due time a pending job may go without
	// its dispatch before it counts as stranded. It must exceed the
	// difference between the clocks of clients and servers. Default 1m.
	Grace time.Duration
	// DryRun finds the stranded jobs without dispatching them.
	DryRun bool
	// Limit bounds the records read, as Filter.Limit. Default 10000.
	Limit int
}

// Sweep finds stranded jobs, pending jobs whose dispatch is gone, and
// dispatches them again under their current token, as Kick does. A
// dispatch is lost when a control call (Requeue, Reprocess) dies between
// writing the record and publishing it, or when the work stream is purged.
//
// A pending job is stranded when it has been due (its next_retry_at, or
// the last change of its record) for longer than Grace, and the queue's
// run subject holds no dispatch older than its due time plus Grace. The
// run subject is first in, first out and keeps every dispatch until it is
// acknowledged, including those being handled, so a job whose dispatch
// waits behind a backlog is never taken for stranded.
//
// It returns the stranded jobs it dispatched (with DryRun, found). When
// JetStream fails it returns those dispatched before, and an error that
// wraps ErrUnavailable and names the job it could not dispatch, if any.
// Sweep changes no record and emits no audit event; extra dispatches are
// harmless. A job dispatched by a sweep counts as stranded again until a
// worker takes its dispatch, so sweeping a queue that no worker serves
// adds a dispatch each time.
func (c *Client) Sweep(ctx context.Context, o SweepOptions) ([]Record, error) {
	if o.Grace == 0 {
		o.Grace = time.Minute
	}
	if o.Grace < 0 || o.Limit < 0 {
		return nil, fmt.Errorf("%w: negative sweep grace or limit", ErrInvalidConfig)
	}
	if o.Queue != "" {
		if err := checkQueue(o.Queue); err != nil {
			return nil, err
		}
	}
	recs, err := c.List(ctx, Filter{Queue: o.Queue, Status: StatusPending, Limit: o.Limit})
	if err != nil {
		return nil, err
	}
	now := c.cfg.Now()
	oldest := map[string]time.Time{} // queue → oldest queued dispatch; zero: none
	var stranded []Record
	for _, rec := range recs {
		if rec.Dispatch == "" {
			continue
		}
		due := rec.UpdatedAt
		if rec.NextRetryAt.After(due) {
			due = rec.NextRetryAt
		}
		if now.Sub(due) < o.Grace {
			continue
		}
		first, ok := oldest[rec.Queue]
		if !ok {
			if first, err = c.oldestDispatch(ctx, rec.Queue); err != nil {
				return stranded, err
			}
			oldest[rec.Queue] = first
		}
		if !first.IsZero() && !first.After(due.Add(o.Grace)) {
			continue // its dispatch may still be queued
		}
		if !o.DryRun {
			if err := c.publishDispatch(ctx, rec.Queue, rec.Key, rec.Dispatch, nil); err != nil {
				return stranded, fmt.Errorf("jobs: stranded job %q not dispatched: %w", rec.Key, err)
			}
		}
		stranded = append(stranded, rec)
	}
	return stranded, nil
}

// oldestDispatch returns when the oldest dispatch on queue's run subject
// was stored, or zero when there is none.
func (c *Client) oldestDispatch(ctx context.Context, queue string) (time.Time, error) {
	m, err := c.work.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(runSubject(queue)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, opErr(ctx, "sweep", queue, err)
	}
	return m.Time, nil
}
