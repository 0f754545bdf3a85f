package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// kvLeaseCheckMax bounds how long KV.Wait goes without comparing a live
// claim's lease with the store's clock. With the real clock the check
// runs when the lease ends; the bound matters for injected clocks.
const kvLeaseCheckMax = 500 * time.Millisecond

// Wait implements Waiter with a KV watch on key: it gets the current
// record, then every change to it, and never polls the bucket. A claim's
// lease is compared with the store's clock when it is due to end (and at
// least every 500 ms), since nothing is written when an owner dies. It
// returns an error wrapping ErrUnavailable when JetStream cannot be
// reached or the watch ends.
func (k *KV) Wait(ctx context.Context, key, fingerprint string) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, waitErr(key, err)
	}
	if !ValidKey(key) {
		return Claim{}, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	w, err := k.kv.Watch(ctx, key)
	if err != nil {
		return Claim{}, opErr(ctx, "watch", key, err)
	}
	defer func() { _ = w.Stop() }()

	var (
		seen       bool // a record or deletion was delivered
		leaseUntil time.Time
		timer      *time.Timer
		due        <-chan time.Time
	)
	arm := func() {
		d := min(leaseUntil.Sub(k.now()), kvLeaseCheckMax)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		due = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return Claim{}, waitErr(key, ctx.Err())
		case <-due:
			if !k.now().Before(leaseUntil) {
				return Claim{}, fmt.Errorf("%w: key %s: lease ended at %s", ErrClaimExpired, key, leaseUntil.UTC().Format(time.RFC3339Nano))
			}
			arm()
		case e, ok := <-w.Updates():
			if !ok {
				return Claim{}, opErr(ctx, "watch", key, errors.New("watch ended"))
			}
			if e == nil { // the initial values are delivered
				if !seen {
					return Claim{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
				}
				continue
			}
			seen = true
			if e.Operation() != jetstream.KeyValuePut {
				return Claim{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
			}
			rec, err := decodeKVRecord(key, e.Revision(), e.Value())
			if err != nil {
				return Claim{}, err
			}
			c, done, err := waitDecision(rec.record(key, e.Revision()), fingerprint, k.now())
			if done {
				return c, err
			}
			leaseUntil = rec.LeaseUntil
			arm()
		}
	}
}
