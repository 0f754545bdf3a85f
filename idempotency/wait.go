package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrClaimExpired means the key's claim outlived its lease without a
// result: its owner is presumed crashed, and a Claim takes it over.
var ErrClaimExpired = errors.New("idempotency: claim expired")

// Waiter is implemented by stores that can wait for the result of an
// operation another owner is running. Both Memory and KV implement it.
// Implementations must be safe for concurrent use.
type Waiter interface {
	// Wait blocks until the record of key is finished, and returns a
	// Claim with Status Completed (and the Result) or Failed (and the
	// Failure). Nothing is owned. It returns early with ErrNotFound when
	// the key has no record (it was never claimed, or was released or
	// cleared) and with ErrClaimExpired when its claim's lease has
	// passed: in both cases the caller may Claim the key. Renewals of the
	// claim are waited through.
	//
	// When fingerprint is not empty, a record with another fingerprint
	// gives ErrKeyReuse. Wait also returns ErrInvalidKey for a bad key,
	// an error wrapping ctx's error when ctx ends first, and stores'
	// errors such as ErrUnavailable or ErrCorrupt.
	Wait(ctx context.Context, key, fingerprint string) (Claim, error)
}

var _ Waiter = (*Memory)(nil)

// waitDecision decides what Wait returns for the record r at time now:
// done is false while r is a live claim.
func waitDecision(r Record, fingerprint string, now time.Time) (c Claim, done bool, err error) {
	if fingerprint != "" && r.Fingerprint != fingerprint {
		return Claim{}, true, fmt.Errorf("%w: key %s", ErrKeyReuse, r.Key)
	}
	switch r.State {
	case StateCompleted:
		return Claim{Key: r.Key, Status: Completed, Result: r.Result, Revision: r.Revision}, true, nil
	case StateFailed:
		return Claim{Key: r.Key, Status: Failed, Failure: r.Failure, Revision: r.Revision}, true, nil
	}
	if !now.Before(r.LeaseUntil) {
		return Claim{}, true, fmt.Errorf("%w: key %s: owner %s's lease ended at %s", ErrClaimExpired, r.Key, r.Owner, r.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	return Claim{}, false, nil
}

// waitErr wraps the error of a wait that ctx ended.
func waitErr(key string, err error) error {
	return fmt.Errorf("idempotency: wait for key %s: %w", key, err)
}

// memoryPollMax bounds the interval at which Memory.Wait looks at the
// record again.
const memoryPollMax = 20 * time.Millisecond

// Wait implements Waiter. The memory store has no change feed, so Wait
// looks at the record every few milliseconds (1 ms, doubling up to 20 ms),
// which costs one lock per look.
func (m *Memory) Wait(ctx context.Context, key, fingerprint string) (Claim, error) {
	if !ValidKey(key) {
		return Claim{}, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	var t *time.Timer
	poll := time.Millisecond
	for {
		if err := ctx.Err(); err != nil {
			return Claim{}, waitErr(key, err)
		}
		c, done, err := m.waitLook(key, fingerprint)
		if done {
			return c, err
		}
		if t == nil {
			t = time.NewTimer(poll)
			defer t.Stop()
		} else {
			t.Reset(poll)
		}
		select {
		case <-ctx.Done():
			return Claim{}, waitErr(key, ctx.Err())
		case <-t.C:
		}
		poll = min(2*poll, memoryPollMax)
	}
}

// waitLook decides Wait from the current record of key.
func (m *Memory) waitLook(key, fingerprint string) (Claim, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.lookup(key, now)
	if r == nil {
		return Claim{}, true, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	rec := *r
	rec.Result = append([]byte(nil), r.Result...)
	return waitDecision(rec, fingerprint, now)
}
