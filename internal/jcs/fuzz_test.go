package jcs

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzMarshal decodes arbitrary JSON and checks that its canonical form is
// valid, compact JSON and a fixed point: decoding and canonicalizing it
// again yields the same bytes.
func FuzzMarshal(f *testing.F) {
	for _, seed := range []string{
		`null`, `true`, `0`, `-0`, `-0.0`, `1e21`, `1E-7`, `0.000001`, `5e-324`,
		`1.7976931348623157e308`, `9007199254740993`, `295147905179352830000`,
		`123456789012345678901234567890`, `1e400`, `"\u0000\u001f\"\\/<>&\u2028"`,
		`"\ud83d\ude00"`, `"\ud800"`, `[1,[2,[3,{}]]]`,
		`{"\u20ac":1,"\r":2,"\ufb33":3,"1":4,"\ud83d\ude00":5,"\u0080":6,"\u00f6":7,"\ue000":8}`,
		`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]}`,
		`{"a":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ok := decodeFuzz(data, true)
		if !ok {
			t.Skip()
		}
		out, err := Marshal(in)
		if err != nil {
			require.ErrorIs(t, err, ErrUnsupported)
			return
		}
		require.True(t, json.Valid(out), "invalid JSON %q", out)
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, out))
		require.Equal(t, string(out), compact.String(), "insignificant whitespace")

		again, ok := decodeFuzz(out, true)
		require.True(t, ok)
		out2, err := Marshal(again)
		require.NoError(t, err)
		require.Equal(t, string(out), string(out2), "not a fixed point")

		// Numbers decoded as float64 must give the same text as numbers
		// decoded as json.Number, which succeeded above.
		asFloats, ok := decodeFuzz(data, false)
		require.True(t, ok)
		out3, err := Marshal(asFloats)
		require.NoError(t, err)
		require.Equal(t, string(out), string(out3), "float64 and json.Number paths differ")
	})
}

// decodeFuzz decodes one JSON value, with numbers as json.Number when
// useNumber is set and as float64 otherwise.
func decodeFuzz(data []byte, useNumber bool) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if useNumber {
		dec.UseNumber()
	}
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}
