package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFingerprint(t *testing.T) {
	hashOf := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	type order struct {
		Amount float64 `json:"amount"`
		ID     string  `json:"id"`
	}
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, hashOf(`null`)},
		{"empty map", map[string]any{}, hashOf(`{}`)},
		{"map", map[string]any{"b": 2, "a": 1.0}, hashOf(`{"a":1,"b":2}`)},
		{"struct", order{Amount: 10.50, ID: "o-1"}, hashOf(`{"amount":10.5,"id":"o-1"}`)},
		{"raw message", json.RawMessage(`{ "id" : "o-1", "amount" : 1.05e1 }`), hashOf(`{"amount":10.5,"id":"o-1"}`)},
		{"string", "<&>", hashOf(`"<&>"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fingerprint(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			require.True(t, ValidKey(got))
		})
	}
}

func TestFingerprintErrors(t *testing.T) {
	tests := []struct {
		name    string
		in      any
		wantMsg string
	}{
		{"NaN", math.Inf(1), "idempotency: invalid params: fingerprint: jcs: unsupported value at $: +Inf is not a JSON number"},
		{"duplicate names", json.RawMessage(`{"a":1,"a":2}`), "idempotency: invalid params: fingerprint: jcs: unsupported value at $.a: duplicate object name"},
		{"invalid utf-8", []string{"\xfe"}, "idempotency: invalid params: fingerprint: jcs: unsupported value at $[0]: string is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fingerprint(tt.in)
			require.Error(t, err)
			require.Empty(t, got)
			require.ErrorIs(t, err, ErrInvalidParams)
			require.True(t, strings.HasPrefix(err.Error(), tt.wantMsg), err.Error())
		})
	}
}
