package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/retry"
)

func TestBackoffExponentialAndCap(t *testing.T) {
	p := retry.Policy{MaxAttempts: 10, BaseDelay: time.Second, MaxDelay: 30 * time.Second, Multiplier: 2}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		require.Equal(t, w*time.Second, p.Backoff(i+1), "attempt %d", i+1)
	}
	// Huge exponents stay capped rather than overflowing.
	require.Equal(t, 30*time.Second, p.Backoff(5000))
	// Multiplier 1 is constant backoff.
	p.Multiplier = 1
	require.Equal(t, time.Second, p.Backoff(7))
	// n < 1 is treated as the first attempt.
	require.Equal(t, time.Second, p.Backoff(0))
}

func TestDelayProportionalSeedExamples(t *testing.T) {
	// Seed 002 "Delay Examples": base 1 s, ×2, ±10%.
	p := retry.DefaultPolicy()
	tests := []struct {
		n      int
		r      float64
		want   time.Duration
		reason string
	}{
		{1, 0.5, 1 * time.Second, "midpoint is the exact backoff"},
		{1, 0, 900 * time.Millisecond, "lowest is -10%"},
		{1, 0.75, 1050 * time.Millisecond, "+5%"},
		{2, 0, 1800 * time.Millisecond, "1.8s"},
		{2, 0.25, 1900 * time.Millisecond, "1.9s"},
		{3, 0, 3600 * time.Millisecond, "3.6s"},
		{3, 0.5, 4 * time.Second, "4.0s"},
		{4, 0, 7200 * time.Millisecond, "7.2s"},
		{4, 0.5, 8 * time.Second, "8.0s"},
		{6, 0.5, 30 * time.Second, "capped at max_delay"},
		{6, 0, 27 * time.Second, "jitter applies after the cap"},
		{6, 0.75, 31500 * time.Millisecond, "jitter may exceed the cap by the factor"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			got := p.Delay(tt.n, 0, tt.r)
			require.InDelta(t, float64(tt.want), float64(got), 1, "n=%d r=%v", tt.n, tt.r)
		})
	}
	// Just below 1 approaches +10%.
	require.InDelta(t, float64(1100*time.Millisecond), float64(p.Delay(1, 0, 0.999999999)), float64(time.Microsecond))
}

func TestDelayKinds(t *testing.T) {
	base := retry.Policy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 10 * time.Second, Multiplier: 2}
	with := func(j retry.Jitter, factor float64) retry.Policy {
		p := base
		p.Jitter, p.JitterFactor = j, factor
		return p
	}
	tests := []struct {
		name string
		p    retry.Policy
		n    int
		prev time.Duration
		r    float64
		want time.Duration
	}{
		{"none", with(retry.JitterNone, 0.5), 3, 0, 0.9, 4 * time.Second},
		{"none capped", with(retry.JitterNone, 0), 9, 0, 0.3, 10 * time.Second},
		{"proportional zero factor", with(retry.JitterProportional, 0), 2, 0, 0.9, 2 * time.Second},
		{"proportional full factor clamps at zero", with(retry.JitterProportional, 1), 2, 0, 0, 0},
		{"proportional full factor top", with(retry.JitterProportional, 1), 2, 0, 0.75, 3 * time.Second},
		{"full r=0", with(retry.JitterFull, 0), 3, 0, 0, 0},
		{"full r=0.25", with(retry.JitterFull, 0), 3, 0, 0.25, time.Second},
		{"full capped", with(retry.JitterFull, 0), 8, 0, 0.5, 5 * time.Second},
		{"equal r=0", with(retry.JitterEqual, 0), 3, 0, 0, 2 * time.Second},
		{"equal r=0.5", with(retry.JitterEqual, 0), 3, 0, 0.5, 3 * time.Second},
		{"equal capped", with(retry.JitterEqual, 0), 8, 0, 0.5, 7500 * time.Millisecond},
		{"decorrelated first", with(retry.JitterDecorrelated, 0), 1, 0, 0.5, 2 * time.Second},
		{"decorrelated from prev", with(retry.JitterDecorrelated, 0), 2, 2 * time.Second, 0.2, 2 * time.Second},
		{"decorrelated r=0 is base", with(retry.JitterDecorrelated, 0), 4, 5 * time.Second, 0, time.Second},
		{"decorrelated capped", with(retry.JitterDecorrelated, 0), 4, 8 * time.Second, 0.9, 10 * time.Second},
		{"r clamped below zero", with(retry.JitterFull, 0), 2, 0, -3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.InDelta(t, float64(tt.want), float64(tt.p.Delay(tt.n, tt.prev, tt.r)), 1)
		})
	}
}

func TestDelayIsPure(t *testing.T) {
	p := retry.DefaultPolicy()
	p.Jitter = retry.JitterDecorrelated
	for i := 0; i < 100; i++ {
		require.Equal(t, p.Delay(3, 2*time.Second, 0.37), p.Delay(3, 2*time.Second, 0.37))
	}
}
