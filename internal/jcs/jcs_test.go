package jcs

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/require"
)

// point is a struct canonicalized through encoding/json.
type point struct {
	Y     int     `json:"y"`
	X     float32 `json:"x"`
	Label string  `json:"label,omitempty"`
}

// rawPair marshals to a fixed JSON text, which may be invalid I-JSON.
type rawPair string

func (r rawPair) MarshalJSON() ([]byte, error) { return []byte(r), nil }

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"nil", nil, `null`},
		{"true", true, `true`},
		{"false", false, `false`},
		{"empty string", "", `""`},
		{"ascii", "hello", `"hello"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short escapes", "\b\t\n\f\r", `"\b\t\n\f\r"`},
		{"other controls", "\x00\x01\x0b\x1f", `"\u0000\u0001\u000b\u001f"`},
		{"del is not escaped", "\x7f", "\"\x7f\""},
		{"html is not escaped", "<a href='x'>&amp;</a>", `"<a href='x'>&amp;</a>"`},
		{"line separators are not escaped", "\u2028\u2029", "\"\u2028\u2029\""},
		{"non-ascii is raw", "é€😀中文", `"é€😀中文"`},
		{"slash is not escaped", "a/b", `"a/b"`},
		{"int", 42, `42`},
		{"negative int", -7, `-7`},
		{"int8", int8(-128), `-128`},
		{"int16", int16(32767), `32767`},
		{"int32", int32(-2147483648), `-2147483648`},
		{"int64 2^53", int64(1 << 53), `9007199254740992`},
		{"int64 -2^53", int64(-1 << 53), `-9007199254740992`},
		{"int64 exact beyond 2^53", int64(1_000_000_000_000_000_000), `1000000000000000000`},
		{"uint", uint(7), `7`},
		{"uint8", uint8(255), `255`},
		{"uint16", uint16(65535), `65535`},
		{"uint32", uint32(4294967295), `4294967295`},
		{"uint64 2^53", uint64(1 << 53), `9007199254740992`},
		{"uintptr", uintptr(9), `9`},
		{"float zero", 0.0, `0`},
		{"float negative zero", math.Copysign(0, -1), `0`},
		{"float integral", 1.0, `1`},
		{"float 4.50", 4.50, `4.5`},
		{"float 2e-3", 2e-3, `0.002`},
		{"float 0.1", 0.1, `0.1`},
		{"float -1.5", -1.5, `-1.5`},
		{"float32 0.1", float32(0.1), `0.1`},
		{"float32 negative zero", float32(math.Copysign(0, -1)), `0`},
		{"float32 3.4028235e38", float32(math.MaxFloat32), `3.4028235e+38`},
		{"json.Number int", json.Number("123"), `123`},
		{"json.Number negative zero", json.Number("-0"), `0`},
		{"json.Number negative zero float", json.Number("-0.0"), `0`},
		{"json.Number fraction", json.Number("4.50"), `4.5`},
		{"json.Number exponent", json.Number("1E30"), `1e+30`},
		{"json.Number excess digits", json.Number("333333333.33333329"), `333333333.3333333`},
		{"json.Number underflow", json.Number("1e-400"), `0`},
		{"json.Number exact big integer", json.Number("10000000000000000000000"), `1e+22`},
		{"json.Number canonical big integer", json.Number("295147905179352830000"), `295147905179352830000`},
		{"json.Number integer with exponent rounds", json.Number("9007199254740993e0"), `9007199254740992`},
		{"empty array", []any{}, `[]`},
		{"nil array", []any(nil), `null`},
		{"array", []any{1, "a", true, nil, 2.5}, `[1,"a",true,null,2.5]`},
		{"string slice", []string{"b", "a"}, `["b","a"]`},
		{"nil string slice", []string(nil), `null`},
		{"empty object", map[string]any{}, `{}`},
		{"nil object", map[string]any(nil), `null`},
		{"object sorted", map[string]any{"b": 1, "a": 2, "c": 3}, `{"a":2,"b":1,"c":3}`},
		{"string map", map[string]string{"z": "1", "y": "2"}, `{"y":"2","z":"1"}`},
		{"nil string map", map[string]string(nil), `null`},
		{"key prefix sorts first", map[string]any{"ab": 1, "a": 2, "": 3}, `{"":3,"a":2,"ab":1}`},
		{"key escapes", map[string]any{"a\"b": 1, "\n": 2}, `{"\n":2,"a\"b":1}`},
		{
			"nested",
			map[string]any{
				"outer": map[string]any{"z": []any{map[string]any{"b": 1, "a": 2}}, "a": map[string]string{}},
				"arr":   []any{[]any{}, map[string]any{}},
			},
			`{"arr":[[],{}],"outer":{"a":{},"z":[{"a":2,"b":1}]}}`,
		},
		{"struct via encoding/json", point{Y: 2, X: 0.1}, `{"x":0.1,"y":2}`},
		{"struct pointer", &point{Y: 1, Label: "<p>"}, `{"label":"<p>","x":0,"y":1}`},
		{"nil pointer", (*point)(nil), `null`},
		{"named map type", map[string]int{"b": 2, "a": 1}, `{"a":1,"b":2}`},
		{"byte slice is base64", []byte("hi"), `"aGk="`},
		{"time", time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), `"2024-01-02T03:04:05Z"`},
		{"raw message is re-canonicalized", json.RawMessage(`{ "b" : 1.0, "a" : [ 1E2 ] }`), `{"a":[100],"b":1}`},
		{"marshaler output html unescaped", rawPair(`"\u003c\u0026\u003e"`), `"<&>"`},
		{"int slice", []int{3, 1}, `[3,1]`},
		{"nested struct in any map", map[string]any{"p": point{Y: 5}}, `{"p":{"x":0,"y":5}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}
}

// TestNumbersRFC8785 checks the number samples of RFC 8785 Appendix B
// (IEEE 754 bit patterns) plus the examples of section 3.2.2.3.
func TestNumbersRFC8785(t *testing.T) {
	tests := []struct {
		bits string
		want string
	}{
		{"0000000000000000", "0"},
		{"8000000000000000", "0"},
		{"0000000000000001", "5e-324"},
		{"8000000000000001", "-5e-324"},
		{"7fefffffffffffff", "1.7976931348623157e+308"},
		{"ffefffffffffffff", "-1.7976931348623157e+308"},
		{"4340000000000000", "9007199254740992"},
		{"c340000000000000", "-9007199254740992"},
		{"4430000000000000", "295147905179352830000"},
		{"44b52d02c7e14af5", "9.999999999999997e+22"},
		{"44b52d02c7e14af6", "1e+23"},
		{"44b52d02c7e14af7", "1.0000000000000001e+23"},
		{"444b1ae4d6e2ef4e", "999999999999999700000"},
		{"444b1ae4d6e2ef4f", "999999999999999900000"},
		{"444b1ae4d6e2ef50", "1e+21"},
		{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
		{"3eb0c6f7a0b5ed8d", "0.000001"},
		{"41b3de4355555553", "333333333.3333332"},
		{"41b3de4355555554", "333333333.33333325"},
		{"41b3de4355555555", "333333333.3333333"},
		{"41b3de4355555556", "333333333.3333334"},
		{"41b3de4355555557", "333333333.33333343"},
		{"becbf647612f3696", "-0.0000033333333333333333"},
		{"43143ff3c1cb0959", "1424953923781206.2"},
	}
	for _, tt := range tests {
		t.Run(tt.bits, func(t *testing.T) {
			b, err := hex.DecodeString(tt.bits)
			require.NoError(t, err)
			f := math.Float64frombits(binary.BigEndian.Uint64(b))
			got, err := Marshal(f)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}

	examples := []struct {
		in   float64
		want string
	}{
		{1e21, "1e+21"},
		{1e20, "100000000000000000000"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{0.000001, "0.000001"},
		{0.0000015, "0.0000015"},
		{123456789012345680000, "123456789012345680000"},
		{4.5, "4.5"},
		{0.002, "0.002"},
		{1e-27, "1e-27"},
		{1e30, "1e+30"},
		{5e-324, "5e-324"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{-1.25e25, "-1.25e+25"},
		{123.456, "123.456"},
		{100, "100"},
	}
	for _, tt := range examples {
		t.Run(tt.want, func(t *testing.T) {
			got, err := Marshal(tt.in)
			require.NoError(t, err)
			require.Equal(t, tt.want, string(got))
		})
	}
}

// TestNumberRoundTrip checks, over many random doubles, that the output
// parses back to the same double and has the notation its magnitude calls
// for.
func TestNumberRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		f := math.Float64frombits(r.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		got, err := Marshal(f)
		require.NoError(t, err)
		back, err := parseJSONNumber(string(got))
		require.NoError(t, err, "%s", got)
		require.Equal(t, f, back, "%s", got)
		abs := math.Abs(f)
		hasExp := strings.ContainsRune(string(got), 'e')
		require.Equal(t, abs != 0 && (abs < 1e-6 || abs >= 1e21), hasExp, "%s", got)
		require.False(t, strings.HasSuffix(strings.Split(string(got), "e")[0], ".0"), "%s", got)
	}
}

func TestMarshalErrors(t *testing.T) {
	deep := []any{}
	for range maxDepth {
		deep = []any{deep}
	}
	cyclic := map[string]any{}
	cyclic["self"] = cyclic

	tests := []struct {
		name     string
		in       any
		wantPath string
		wantMsg  string
	}{
		{"NaN", math.NaN(), "$", "jcs: unsupported value at $: NaN is not a JSON number"},
		{"+Inf", math.Inf(1), "$", "jcs: unsupported value at $: +Inf is not a JSON number"},
		{"-Inf float32", float32(math.Inf(-1)), "$", "jcs: unsupported value at $: -Inf is not a JSON number"},
		{"int64 2^53+1", int64(1<<53 + 1), "$", "jcs: unsupported value at $: integer 9007199254740993 is not exactly representable as a double (it would become 9007199254740992)"},
		{"int64 -(2^53+1)", int64(-1<<53 - 1), "$", "not exactly representable"},
		{"int64 max", int64(math.MaxInt64), "$", "integer 9223372036854775807 is not exactly representable"},
		{"uint64 2^63 has no exact canonical text", uint64(1 << 63), "$", "integer 9223372036854775808 is not exactly representable as a double (it would become 9223372036854776000)"},
		{"uint64 max", uint64(math.MaxUint64), "$", "integer 18446744073709551615 is not exactly representable"},
		{"json.Number 2^53+1", json.Number("9007199254740993"), "$", "integer 9007199254740993 is not exactly representable"},
		{"json.Number huge integer", json.Number("123456789012345678901234567890"), "$", "not exactly representable"},
		{"json.Number too large", json.Number("1e400"), "$", "json.Number 1e400 is beyond the range of a double"},
		{"json.Number huge integer literal", json.Number("1" + strings.Repeat("0", 400)), "$", "beyond the range of a double"},
		{"json.Number empty", json.Number(""), "$", `json.Number "" is not a valid JSON number`},
		{"json.Number hex", json.Number("0x10"), "$", "not a valid JSON number"},
		{"json.Number leading zero", json.Number("01"), "$", "not a valid JSON number"},
		{"json.Number plus", json.Number("+1"), "$", "not a valid JSON number"},
		{"json.Number inf", json.Number("Inf"), "$", "not a valid JSON number"},
		{"json.Number dot", json.Number("1."), "$", "not a valid JSON number"},
		{"json.Number exponent", json.Number("1e"), "$", "not a valid JSON number"},
		{"invalid utf-8 string", "ab\xffc", "$", "jcs: unsupported value at $: string is not valid UTF-8 (bad byte 0xff at offset 2)"},
		{"surrogate encoded in utf-8", "\xed\xa0\x80", "$", "not valid UTF-8"},
		{"invalid utf-8 key", map[string]any{"k\xc3": 1}, `$["k\xc3"]`, "not valid UTF-8"},
		{"invalid utf-8 string map value", map[string]string{"k": "\xc3"}, "$.k", "not valid UTF-8"},
		{"invalid utf-8 in string slice", []string{"ok", "\x80"}, "$[1]", "not valid UTF-8"},
		{"nested path", map[string]any{"a": []any{1, map[string]any{"odd key": math.NaN()}}}, `$.a[1]["odd key"]`, `jcs: unsupported value at $.a[1]["odd key"]: NaN is not a JSON number`},
		{"channel", make(chan int), "$", "jcs: unsupported value at $: encoding/json cannot marshal chan int: json: unsupported type: chan int"},
		{"func in map", map[string]any{"f": func() {}}, "$.f", "encoding/json cannot marshal func()"},
		{"struct big integer", struct {
			ID uint64 `json:"id"`
		}{ID: 1<<60 + 1}, "$.id", "integer 1152921504606846977 is not exactly representable"},
		{"duplicate names from marshaler", rawPair(`{"a":1,"a":2}`), "$.a", "duplicate object name"},
		{"nested duplicate names", map[string]any{"x": rawPair(`[0,{"b":{},"b":{}}]`)}, "$.x[1].b", "duplicate object name"},
		{"too deep", deep, "$" + strings.Repeat("[0]", maxDepth), "nesting deeper than 1000 levels"},
		{"cyclic map", cyclic, "$" + strings.Repeat(".self", maxDepth), "nesting deeper than 1000 levels"},
		{"too deep through marshaler", rawPair(strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1)), "$" + strings.Repeat("[0]", maxDepth), "nesting deeper than 1000 levels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Marshal(tt.in)
			require.Error(t, err)
			require.Nil(t, got)
			require.ErrorIs(t, err, ErrUnsupported)
			var uve *UnsupportedValueError
			require.ErrorAs(t, err, &uve)
			require.Equal(t, tt.wantPath, uve.Path)
			require.Contains(t, err.Error(), tt.wantMsg)
			require.True(t, strings.HasPrefix(err.Error(), "jcs: "), err.Error())
		})
	}
}

func TestUnsupportedValueErrorUnwrap(t *testing.T) {
	_, err := Marshal(map[string]any{"c": make(chan int)})
	var uve *UnsupportedValueError
	require.ErrorAs(t, err, &uve)
	require.Equal(t, "$.c", uve.Path)
	var jerr *json.UnsupportedTypeError
	require.ErrorAs(t, err, &jerr)
	require.NotErrorIs(t, err, errors.New("jcs: unsupported value"))
}

// TestKeyOrderRFC8785 is the sorting example of RFC 8785 section 3.2.3.
func TestKeyOrderRFC8785(t *testing.T) {
	in := map[string]any{
		"\u20ac":     "Euro Sign",
		"\r":         "Carriage Return",
		"\ufb33":     "Hebrew Letter Dalet With Dagesh",
		"1":          "One",
		"\U0001f600": "Emoji: Grinning Face",
		"\u0080":     "Control",
		"\u00f6":     "Latin Small Letter O With Diaeresis",
	}
	got, err := Marshal(in)
	require.NoError(t, err)
	want := `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","` + "\u00f6" + `":"Latin Small Letter O With Diaeresis","` +
		"\u20ac" + `":"Euro Sign","` + "\U0001f600" + `":"Emoji: Grinning Face","` + "\ufb33" + `":"Hebrew Letter Dalet With Dagesh"}`
	require.Equal(t, want, string(got))
}

// TestSampleRFC8785 is the example of RFC 8785 section 3.2.4, decoded from
// its JSON text as other callers do.
func TestSampleRFC8785(t *testing.T) {
	const in = `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	const want = `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	v := decodeNumbers(t, []byte(in))
	got, err := Marshal(v)
	require.NoError(t, err)
	require.Equal(t, want, string(got))

	got, err = Marshal(json.RawMessage(in))
	require.NoError(t, err)
	require.Equal(t, want, string(got))
}

// TestCompareUTF16 checks compareUTF16 against a direct comparison of the
// UTF-16 encodings on random strings biased to the ranges where UTF-16 and
// UTF-8 orders differ.
func TestCompareUTF16(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want int
	}{
		{"equal", "abc", "abc", 0},
		{"empty first", "", "a", -1},
		{"prefix first", "a", "ab", -1},
		{"ascii", "b", "a", 1},
		{"astral before private use", "\U0001f600", "\ue000", -1},
		{"astral before U+FFFF", "\U00010000", "\uffff", -1},
		{"astral after U+D7FF", "\U00010000", "\ud7ff", 1},
		{"astral order", "\U0001f600", "\U0001f601", -1},
		{"astral high surrogate differs", "\U00010400", "\U000103ff", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, compareUTF16(tt.a, tt.b))
			require.Equal(t, -tt.want, compareUTF16(tt.b, tt.a))
		})
	}

	r := rand.New(rand.NewPCG(3, 4))
	pick := func() rune {
		switch r.IntN(4) {
		case 0:
			return rune(r.IntN(0x80))
		case 1:
			return rune(0xE000 + r.IntN(0x2000))
		case 2:
			return rune(0x10000 + r.IntN(0x100000))
		default:
			return rune(r.IntN(0xD800))
		}
	}
	randString := func() string {
		rs := make([]rune, r.IntN(4))
		for i := range rs {
			rs[i] = pick()
		}
		return string(rs)
	}
	for range 100_000 {
		a, b := randString(), randString()
		want := slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		require.Equal(t, want, compareUTF16(a, b), "%q vs %q", a, b)
	}
}

func TestAppend(t *testing.T) {
	t.Run("appends", func(t *testing.T) {
		got, err := Append([]byte("prefix:"), map[string]any{"a": 1})
		require.NoError(t, err)
		require.Equal(t, `prefix:{"a":1}`, string(got))
	})
	t.Run("error returns dst", func(t *testing.T) {
		dst := make([]byte, 3, 64)
		copy(dst, "abc")
		got, err := Append(dst, []any{1, 2, math.NaN()})
		require.ErrorIs(t, err, ErrUnsupported)
		require.Equal(t, "abc", string(got))
		require.Equal(t, "abc", string(dst))
	})
}

// TestDeterministic marshals the same large map many times; Go randomizes
// map iteration, so a missing sort would show.
func TestDeterministic(t *testing.T) {
	m := map[string]any{}
	for i := range 200 {
		m[string(rune('a'+i%26))+strings.Repeat("x", i)] = i
	}
	first, err := Marshal(m)
	require.NoError(t, err)
	for range 20 {
		got, err := Marshal(m)
		require.NoError(t, err)
		require.Equal(t, string(first), string(got))
	}
}

// decodeNumbers decodes JSON text keeping numbers as json.Number.
func decodeNumbers(t testing.TB, data []byte) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v))
	return v
}

// parseJSONNumber parses number text with encoding/json, an independent
// reader of the output.
func parseJSONNumber(s string) (float64, error) {
	var f float64
	err := json.Unmarshal([]byte(s), &f)
	return f, err
}
