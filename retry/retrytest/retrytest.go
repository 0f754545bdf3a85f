// Package retrytest has fakes for testing code that uses package retry: a
// manual Clock and a scripted Random source, so that backoff waits are
// exact and tests never sleep.
package retrytest

import (
	"context"
	"sync"
	"time"

	"github.com/jetretry/jetretry/retry"
)

// Clock is a manual retry.Clock. Time moves only when Advance is called.
// It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced when timers change
}

var _ retry.Clock = (*Clock)(nil)

// NewClock returns a Clock set to start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock has been advanced by d.
// A timer for d <= 0 fires at once.
func (c *Clock) NewTimer(d time.Duration) retry.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	c.notify()
	return t
}

// Advance moves the clock forward by d and fires every timer that is due.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
			continue
		}
		kept = append(kept, t)
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	c.notify()
}

// Pending returns the durations until each pending timer fires, in the
// order they were made.
func (c *Clock) Pending() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Duration, len(c.timers))
	for i, t := range c.timers {
		out[i] = t.at.Sub(c.now)
	}
	return out
}

// WaitForTimers blocks until at least n timers are pending or ctx ends,
// and returns ctx's error in the latter case.
func (c *Clock) WaitForTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		got, ch := len(c.timers), c.changed
		c.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// notify wakes WaitForTimers. c.mu must be held.
func (c *Clock) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type timer struct {
	c  *Clock
	at time.Time
	ch chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			t.c.notify()
			return true
		}
	}
	return false
}

// Random is a retry.Random that returns scripted values. Each value is a
// float in [0, 1), returned as the 64 random bits that retry turns into
// that float (exactly, for multiples of 2⁻⁵³ such as 0.25 or 0.5). After the
// script runs out it repeats its last value; an empty script gives 0.
// It is safe for concurrent use.
type Random struct {
	mu     sync.Mutex
	floats []float64
	next   int
}

var _ retry.Random = (*Random)(nil)

// NewRandom returns a Random that yields floats in order.
func NewRandom(floats ...float64) *Random {
	return &Random{floats: floats}
}

// Uint64 implements retry.Random.
func (r *Random) Uint64() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.floats) == 0 {
		return 0
	}
	f := r.floats[min(r.next, len(r.floats)-1)]
	r.next++
	return uint64(f*(1<<53)) << 11
}
