package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// update rewrites golden files in testdata.
var update = flag.Bool("update", false, "rewrite golden files in testdata")

// keyVectorsPath is the golden file of cross-language key test vectors.
const keyVectorsPath = "testdata/key_vectors.json"

// keyVector is one entry of testdata/key_vectors.json.
type keyVector struct {
	Name             string          `json:"name"`
	Operation        string          `json:"operation"`
	TenantID         string          `json:"tenant_id"`
	CorrelationID    string          `json:"correlation_id"`
	AdditionalParams json.RawMessage `json:"additional_params"`
	Canonical        string          `json:"canonical"`
	Key              string          `json:"key"`
}

// keyVectorInputs returns the inputs of the golden vectors; the params are
// JSON text so that number spellings such as -0, 1.0 and 1E21 reach the
// file.
func keyVectorInputs() []keyVector {
	return []keyVector{
		{Name: "empty everything", AdditionalParams: json.RawMessage(`{}`)},
		{Name: "null params become an empty object", Operation: "op", AdditionalParams: json.RawMessage(`null`)},
		{
			Name: "seed example", Operation: "kill_switch_update", TenantID: "tenant-123", CorrelationID: "corr-456",
			AdditionalParams: json.RawMessage(`{"switch_name": "all_execution"}`),
		},
		{
			Name: "empty strings stay empty", Operation: "refund", TenantID: "", CorrelationID: "",
			AdditionalParams: json.RawMessage(`{"reason": ""}`),
		},
		{
			Name: "nested params", Operation: "schedule_job", TenantID: "t1", CorrelationID: "c1",
			AdditionalParams: json.RawMessage(`{"z": {}, "retry": {"policy": {"multiplier": 2, "initial_ms": 100}, "max_attempts": 5}, "a": [], "targets": [{"id": "b"}, {"id": "a"}]}`),
		},
		{
			Name: "member order does not matter", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"b": 1, "a": 2, "B": 3, "_": 4, "aa": 5, "1": 6, "": 7}`),
		},
		{
			Name: "unicode", Operation: "paiement_créé", TenantID: "テナント-東京", CorrelationID: "corr-é😀",
			AdditionalParams: json.RawMessage(`{"name": "José Müller", "emoji": "😀🎉", "cjk": "中文字符", "escaped": "\u00e9\ud83d\ude00", "é": "key with accent"}`),
		},
		{
			Name: "astral keys sort by UTF-16 code units", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"\ue000": "private use", "\ud83d\ude00": "grinning face", "\uffff": "last BMP", "a": "ascii", "\u20ac": "euro"}`),
		},
		{
			Name: "html characters are not escaped", Operation: "render", TenantID: "t&co", CorrelationID: "<c>",
			AdditionalParams: json.RawMessage(`{"html": "<script>alert('x&y')</script>", "<key>": "&amp;", "seps": "\u2028\u2029"}`),
		},
		{
			Name: "control characters", Operation: "op", TenantID: "t", CorrelationID: "line1\nline2",
			AdditionalParams: json.RawMessage(`{"ctl": "\u0000\u0001\b\t\n\u000b\f\r\u001f\u007f", "quote": "\"\\/"}`),
		},
		{
			Name: "integers", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"zero": 0, "neg_zero": -0, "neg": -42, "max_safe": 9007199254740992, "min_safe": -9007199254740992}`),
		},
		{
			Name: "large integers exact as doubles", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"e18": 1000000000000000000, "two_pow_68": 295147905179352830000, "e22": 10000000000000000000000}`),
		},
		{
			Name: "floats", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"tenth": 0.1, "one_point_zero": 1.0, "half": 4.50, "neg_zero": -0.0, "e21": 1e21, "e20": 1E20, "tiny": 1e-7, "micro": 0.000001, "sci": 1.5E-7, "pi": 3.141592653589793, "long": 333333333.33333329, "max": 1.7976931348623157e308, "min": 5e-324}`),
		},
		{
			Name: "booleans and null", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"t": true, "f": false, "n": null}`),
		},
		{
			Name: "arrays keep their order", Operation: "op", TenantID: "t", CorrelationID: "c",
			AdditionalParams: json.RawMessage(`{"list": [3, 1, 2], "mixed": [1, "two", true, null, {"k": "v", "a": [ ]}, []], "strings": ["b", "a"]}`),
		},
	}
}

// decodeParams decodes JSON params as callers should: numbers as
// json.Number. JSON null gives nil params.
func decodeParams(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var params map[string]any
	require.NoError(t, dec.Decode(&params))
	return params
}

// renderKeyVectors computes every vector of keyVectorInputs and returns
// the golden file's content.
func renderKeyVectors(t *testing.T) []byte {
	t.Helper()
	inputs := keyVectorInputs()
	vectors := make([]keyVector, 0, len(inputs))
	for _, in := range inputs {
		params := decodeParams(t, in.AdditionalParams)
		canon, err := Canonical(in.Operation, in.TenantID, in.CorrelationID, params)
		require.NoError(t, err, in.Name)
		key, err := Key(in.Operation, in.TenantID, in.CorrelationID, params)
		require.NoError(t, err, in.Name)
		in.Canonical, in.Key = string(canon), key
		vectors = append(vectors, in)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(vectors))
	return buf.Bytes()
}

// TestKeyVectorsGolden checks testdata/key_vectors.json against the
// vectors computed from keyVectorInputs; -update rewrites it.
func TestKeyVectorsGolden(t *testing.T) {
	got := renderKeyVectors(t)
	if *update {
		require.NoError(t, os.WriteFile(keyVectorsPath, got, 0o644))
	}
	want, err := os.ReadFile(keyVectorsPath)
	require.NoError(t, err, "run go test -run TestKeyVectorsGolden -update")
	require.Equal(t, string(want), string(got), "golden file is stale; run go test -run TestKeyVectorsGolden -update")
}

// TestKeyVectors reads testdata/key_vectors.json as another implementation
// would and checks Canonical and Key against each vector.
func TestKeyVectors(t *testing.T) {
	data, err := os.ReadFile(keyVectorsPath)
	require.NoError(t, err)
	var vectors []keyVector
	require.NoError(t, json.Unmarshal(data, &vectors))
	require.Len(t, vectors, len(keyVectorInputs()))
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			params := decodeParams(t, v.AdditionalParams)
			canon, err := Canonical(v.Operation, v.TenantID, v.CorrelationID, params)
			require.NoError(t, err)
			require.Equal(t, v.Canonical, string(canon))
			key, err := Key(v.Operation, v.TenantID, v.CorrelationID, params)
			require.NoError(t, err)
			require.Equal(t, v.Key, key)
			sum := sha256.Sum256([]byte(v.Canonical))
			require.Equal(t, hex.EncodeToString(sum[:]), v.Key)
			require.True(t, ValidKey(key))
		})
	}
}

func TestKeySeedExample(t *testing.T) {
	canon, err := Canonical("kill_switch_update", "tenant-123", "corr-456", map[string]any{"switch_name": "all_execution"})
	require.NoError(t, err)
	require.Equal(t, `{"additional_params":{"switch_name":"all_execution"},"correlation_id":"corr-456","operation":"kill_switch_update","tenant_id":"tenant-123"}`, string(canon))
}

// TestKeyEquivalence checks which inputs must and must not share a key.
func TestKeyEquivalence(t *testing.T) {
	type input struct {
		op, tenant, corr string
		params           map[string]any
	}
	base := input{"op", "t", "c", map[string]any{"a": 1, "b": "x"}}
	tests := []struct {
		name     string
		a, b     input
		wantSame bool
	}{
		{"nil and empty params", input{"op", "t", "c", nil}, input{"op", "t", "c", map[string]any{}}, true},
		{"int and float and json.Number", input{"op", "t", "c", map[string]any{"n": 1}}, input{"op", "t", "c", map[string]any{"n": 1.0}}, true},
		{"json.Number spelling", input{"op", "t", "c", map[string]any{"n": json.Number("1e2")}}, input{"op", "t", "c", map[string]any{"n": uint8(100)}}, true},
		{"map[string]string and map[string]any", input{"op", "t", "c", map[string]any{"m": map[string]string{"k": "v"}}}, input{"op", "t", "c", map[string]any{"m": map[string]any{"k": "v"}}}, true},
		{"struct and map", input{"op", "t", "c", map[string]any{"s": struct {
			K string `json:"k"`
		}{"v"}}}, input{"op", "t", "c", map[string]any{"s": map[string]any{"k": "v"}}}, true},
		{"same inputs", base, base, true},
		{"different operation", base, input{"op2", "t", "c", base.params}, false},
		{"different tenant", base, input{"op", "t2", "c", base.params}, false},
		{"different correlation", base, input{"op", "t", "c2", base.params}, false},
		{"different param value", base, input{"op", "t", "c", map[string]any{"a": 2, "b": "x"}}, false},
		{"param type matters", input{"op", "t", "c", map[string]any{"a": 1}}, input{"op", "t", "c", map[string]any{"a": "1"}}, false},
		{"fields do not run together", input{"ab", "c", "", nil}, input{"a", "bc", "", nil}, false},
		{"null param differs from missing", input{"op", "t", "c", map[string]any{"a": nil}}, input{"op", "t", "c", map[string]any{}}, false},
		{"array order matters", input{"op", "t", "c", map[string]any{"l": []any{1, 2}}}, input{"op", "t", "c", map[string]any{"l": []any{2, 1}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ka, err := Key(tt.a.op, tt.a.tenant, tt.a.corr, tt.a.params)
			require.NoError(t, err)
			kb, err := Key(tt.b.op, tt.b.tenant, tt.b.corr, tt.b.params)
			require.NoError(t, err)
			require.Equal(t, tt.wantSame, ka == kb)
		})
	}
}

func TestKeyErrors(t *testing.T) {
	tests := []struct {
		name          string
		op            string
		params        map[string]any
		wantInvalid   bool
		wantMsgPrefix string
	}{
		{"NaN", "op", map[string]any{"x": math.NaN()}, true, "idempotency: invalid params: jcs: unsupported value at $.additional_params.x: NaN is not a JSON number"},
		{"inexact integer", "op", map[string]any{"id": uint64(1<<53 + 1)}, true, "idempotency: invalid params: jcs: unsupported value at $.additional_params.id: integer 9007199254740993"},
		{"inexact json.Number", "op", map[string]any{"id": json.Number("12345678901234567890")}, true, "idempotency: invalid params: jcs: unsupported value at $.additional_params.id: integer 12345678901234567890"},
		{"invalid utf-8 value", "op", map[string]any{"s": "\xff"}, true, "idempotency: invalid params: jcs: unsupported value at $.additional_params.s: string is not valid UTF-8"},
		{"invalid utf-8 key", "op", map[string]any{"\xff": 1}, true, `idempotency: invalid params: jcs: unsupported value at $.additional_params["\xff"]`},
		{"unmarshalable", "op", map[string]any{"c": make(chan int)}, true, "idempotency: invalid params: jcs: unsupported value at $.additional_params.c: encoding/json cannot marshal chan int"},
		{"invalid utf-8 operation", "op\xff", nil, true, "idempotency: invalid params: operation is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := Key(tt.op, "t", "c", tt.params)
			require.Error(t, err)
			require.Empty(t, key)
			require.Equal(t, tt.wantInvalid, errors.Is(err, ErrInvalidParams))
			require.True(t, strings.HasPrefix(err.Error(), tt.wantMsgPrefix), err.Error())

			canon, err := Canonical(tt.op, "t", "c", tt.params)
			require.Error(t, err)
			require.Nil(t, canon)
			require.Equal(t, tt.wantInvalid, errors.Is(err, ErrInvalidParams))
		})
	}
	for _, bad := range []struct{ tenant, corr, want string }{
		{"\xff", "c", "idempotency: invalid params: tenant ID is not valid UTF-8"},
		{"t", "\xff", "idempotency: invalid params: correlation ID is not valid UTF-8"},
	} {
		_, err := Key("op", bad.tenant, bad.corr, nil)
		require.EqualError(t, err, bad.want)
	}
}

func TestValidKey(t *testing.T) {
	seed, err := Key("kill_switch_update", "tenant-123", "corr-456", map[string]any{"switch_name": "all_execution"})
	require.NoError(t, err)
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"key output", seed, true},
		{"tokens", "orders.o-1_A=", true},
		{"256 bytes", strings.Repeat("a", 256), true},
		{"empty", "", false},
		{"257 bytes", strings.Repeat("a", 257), false},
		{"leading dot", ".a", false},
		{"trailing dot", "a.", false},
		{"empty token", "a..b", false},
		{"space", "a b", false},
		{"wildcard", "a.*", false},
		{"full wildcard", "a.>", false},
		{"slash", "a/b", false},
		{"unicode", "é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, ValidKey(tt.in))
		})
	}
}

func BenchmarkKey(b *testing.B) {
	b.Run("seed", func(b *testing.B) {
		b.ReportAllocs()
		params := map[string]any{"switch_name": "all_execution"}
		for b.Loop() {
			if _, err := Key("kill_switch_update", "tenant-123", "corr-456", params); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nil params", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Key("kill_switch_update", "tenant-123", "corr-456", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
