package retry_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/retry"
)

func TestPolicyValidate(t *testing.T) {
	ok := retry.DefaultPolicy()
	tests := []struct {
		name  string
		edit  func(*retry.Policy)
		field string // "" means valid
	}{
		{name: "default", edit: func(*retry.Policy) {}},
		{name: "zero delays", edit: func(p *retry.Policy) { p.BaseDelay, p.MaxDelay = 0, 0 }},
		{name: "one attempt", edit: func(p *retry.Policy) { p.MaxAttempts = 1 }},
		{name: "jitter bounds", edit: func(p *retry.Policy) { p.JitterFactor = 1 }},
		{name: "zero attempts", edit: func(p *retry.Policy) { p.MaxAttempts = 0 }, field: "MaxAttempts"},
		{name: "negative attempts", edit: func(p *retry.Policy) { p.MaxAttempts = -2 }, field: "MaxAttempts"},
		{name: "negative base", edit: func(p *retry.Policy) { p.BaseDelay = -time.Second }, field: "BaseDelay"},
		{name: "negative max", edit: func(p *retry.Policy) { p.BaseDelay, p.MaxDelay = 0, -1 }, field: "MaxDelay"},
		{name: "inverted delays", edit: func(p *retry.Policy) { p.BaseDelay, p.MaxDelay = 10*time.Second, time.Second }, field: "MaxDelay"},
		{name: "multiplier below one", edit: func(p *retry.Policy) { p.Multiplier = 0.5 }, field: "Multiplier"},
		{name: "multiplier zero", edit: func(p *retry.Policy) { p.Multiplier = 0 }, field: "Multiplier"},
		{name: "multiplier NaN", edit: func(p *retry.Policy) { p.Multiplier = math.NaN() }, field: "Multiplier"},
		{name: "multiplier Inf", edit: func(p *retry.Policy) { p.Multiplier = math.Inf(1) }, field: "Multiplier"},
		{name: "factor negative", edit: func(p *retry.Policy) { p.JitterFactor = -0.1 }, field: "JitterFactor"},
		{name: "factor above one", edit: func(p *retry.Policy) { p.JitterFactor = 1.5 }, field: "JitterFactor"},
		{name: "factor NaN", edit: func(p *retry.Policy) { p.JitterFactor = math.NaN() }, field: "JitterFactor"},
		{name: "unknown jitter", edit: func(p *retry.Policy) { p.Jitter = 99 }, field: "Jitter"},
		{name: "negative attempt timeout", edit: func(p *retry.Policy) { p.AttemptTimeout = -1 }, field: "AttemptTimeout"},
		{name: "negative max elapsed", edit: func(p *retry.Policy) { p.MaxElapsed = -1 }, field: "MaxElapsed"},
		{name: "nil matcher", edit: func(p *retry.Policy) { p.Retryable = []retry.Matcher{nil} }, field: "Retryable"},
		{name: "nil non-retryable matcher", edit: func(p *retry.Policy) { p.NonRetryable = []retry.Matcher{nil} }, field: "NonRetryable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ok
			tt.edit(&p)
			err := p.Validate()
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, retry.ErrInvalidPolicy)
			var pe *retry.PolicyError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, tt.field, pe.Field)
			require.Contains(t, err.Error(), tt.field)
		})
	}
	require.ErrorIs(t, retry.Policy{}.Validate(), retry.ErrInvalidPolicy)
}

func TestJitterText(t *testing.T) {
	for _, j := range []retry.Jitter{retry.JitterProportional, retry.JitterNone, retry.JitterFull, retry.JitterEqual, retry.JitterDecorrelated} {
		b, err := j.MarshalText()
		require.NoError(t, err)
		var got retry.Jitter
		require.NoError(t, got.UnmarshalText(b))
		require.Equal(t, j, got)
		require.Equal(t, string(b), j.String())
	}
	_, err := retry.ParseJitter("gaussian")
	require.ErrorIs(t, err, retry.ErrInvalidPolicy)

	b, err := json.Marshal(retry.DefaultPolicy())
	require.NoError(t, err)
	require.JSONEq(t, `{"max_attempts":3,"base_delay":1000000000,"max_delay":30000000000,"multiplier":2,"jitter":"proportional","jitter_factor":0.1}`, string(b))
}
