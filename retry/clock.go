package retry

import (
	"math/rand/v2"
	"time"
)

// Clock is the time source of a Manager. Tests inject a fake one (see the
// retrytest package) so that backoff waits are exact and never sleep for
// real. Implementations must be safe for concurrent use.
//
// Per-attempt timeouts (Policy.AttemptTimeout) use the context package and
// so always run on real time.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock.
type Timer interface {
	// C returns the channel the time is delivered on.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped
	// the timer before it fired.
	Stop() bool
}

// Random is the random source of a Manager's jitter.
// Implementations must be safe for concurrent use. A *rand.Rand from
// math/rand/v2 is not: wrap it with a mutex.
type Random interface {
	Uint64() uint64
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// systemRandom uses math/rand/v2's randomly seeded, concurrency-safe
// top-level generator.
type systemRandom struct{}

func (systemRandom) Uint64() uint64 { return rand.Uint64() }

// float64From turns 64 random bits into a uniform float64 in [0, 1).
func float64From(u uint64) float64 {
	return float64(u>>11) / (1 << 53)
}
