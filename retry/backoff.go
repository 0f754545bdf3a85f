package retry

import (
	"math"
	"time"
)

// Backoff returns the capped exponential delay after failed attempt n
// (1-based), before jitter: BaseDelay×Multiplier^(n-1), at most MaxDelay.
// It is a pure function.
func (p Policy) Backoff(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(p.BaseDelay) * math.Pow(p.Multiplier, float64(n-1))
	if math.IsNaN(d) || d >= float64(p.MaxDelay) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// Delay returns the jittered wait after failed attempt n (1-based) and
// before attempt n+1. prev is the previous wait (used only by
// JitterDecorrelated; pass 0 after the first failure) and r is a uniform
// random number in [0, 1). It is a pure function: the same inputs always
// give the same delay.
func (p Policy) Delay(n int, prev time.Duration, r float64) time.Duration {
	if r < 0 || math.IsNaN(r) {
		r = 0
	} else if r >= 1 {
		r = math.Nextafter(1, 0)
	}
	switch p.Jitter {
	case JitterNone:
		return p.Backoff(n)
	case JitterFull:
		return time.Duration(float64(p.Backoff(n)) * r)
	case JitterEqual:
		half := float64(p.Backoff(n)) / 2
		return time.Duration(half + half*r)
	case JitterDecorrelated:
		if prev < p.BaseDelay {
			prev = p.BaseDelay
		}
		hi := 3 * float64(prev)
		d := float64(p.BaseDelay) + (hi-float64(p.BaseDelay))*r
		if d >= float64(p.MaxDelay) {
			return p.MaxDelay
		}
		return time.Duration(d)
	default: // JitterProportional
		d := float64(p.Backoff(n))
		d += d * p.JitterFactor * (2*r - 1)
		if d <= 0 {
			return 0
		}
		return time.Duration(d)
	}
}

// hintDelay clamps a retry-after hint to [0, MaxDelay].
func (p Policy) hintDelay(after time.Duration) time.Duration {
	if after < 0 {
		return 0
	}
	if after > p.MaxDelay {
		return p.MaxDelay
	}
	return after
}
