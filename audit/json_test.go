package audit

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// seedTime is the timestamp of every seed 002 sample.
var seedTime = time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)

// goldenEvents returns the seed 002 samples as Events, with fixed span_id,
// event_id and schema_version, keyed by golden file name.
func goldenEvents() map[string]Event {
	return map[string]Event{
		"retry_attempt": {
			Type:             TypeRetryAttempt,
			Category:         "RETRY_NATS_PUBLISH",
			Operation:        "Publish to exoarmur.audit.append.v1",
			AttemptNumber:    2,
			MaxAttempts:      3,
			DelaySeconds:     1.05,
			ExceptionType:    "TimeoutError",
			ExceptionMessage: "Connection timeout",
			TenantID:         "tenant-123",
			CorrelationID:    "corr-456",
			TraceID:          "trace-789",
			Timestamp:        seedTime,
			SpanID:           "00f067aa0ba902b7",
			EventID:          "0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6b",
			SchemaVersion:    1,
		},
		"retry_exhausted": {
			Type:                  TypeRetryExhausted,
			Category:              "RETRY_KV_GET",
			Operation:             "Get kill switch status",
			TotalAttempts:         3,
			FinalExceptionType:    "TimeoutError",
			FinalExceptionMessage: "KV operation timeout",
			TenantID:              "tenant-123",
			CorrelationID:         "corr-456",
			TraceID:               "trace-789",
			Timestamp:             seedTime,
			SpanID:                "00f067aa0ba902b8",
			EventID:               "0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6c",
			SchemaVersion:         1,
		},
		"idempotency": {
			Type:           TypeIdempotency,
			Category:       "RETRY_KV_PUT",
			Operation:      "Store kill switch state",
			IdempotencyKey: "abc123def456...",
			Action:         ActionHit,
			TenantID:       "tenant-123",
			CorrelationID:  "corr-456",
			TraceID:        "trace-789",
			Timestamp:      seedTime,
			SpanID:         "00f067aa0ba902b9",
			EventID:        "0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6d",
			SchemaVersion:  1,
		},
	}
}

// goldenNames lists the golden files in a fixed order.
var goldenNames = []string{"retry_attempt", "retry_exhausted", "idempotency"}

func TestAppendJSONGolden(t *testing.T) {
	events := goldenEvents()
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			var pretty bytes.Buffer
			require.NoError(t, json.Indent(&pretty, events[name].AppendJSON(nil), "", "    "))
			pretty.WriteByte('\n')
			got := pretty.Bytes()

			path := filepath.Join("testdata", "golden", name+".json")
			if *update {
				require.NoError(t, os.WriteFile(path, got, 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./audit -update to create it")
			require.Equal(t, string(want), string(got))
		})
	}
}

// TestAppendJSONSeedCompat checks our output against the samples of seed
// 002, copied verbatim into testdata/seed002: same values for every seed
// field, the seed fields first and in the seed's order, and no extra field
// but event_id, span_id and schema_version.
func TestAppendJSONSeedCompat(t *testing.T) {
	events := goldenEvents()
	for _, name := range goldenNames {
		t.Run(name, func(t *testing.T) {
			seedJSON, err := os.ReadFile(filepath.Join("testdata", "seed002", name+".json"))
			require.NoError(t, err)
			gotJSON := events[name].AppendJSON(nil)

			var seed, got map[string]any
			require.NoError(t, json.Unmarshal(seedJSON, &seed))
			require.NoError(t, json.Unmarshal(gotJSON, &got))

			for k, want := range seed {
				require.Contains(t, got, k)
				require.Equal(t, want, got[k], "field %s", k)
			}
			var extra []string
			for k := range got {
				if _, ok := seed[k]; !ok {
					extra = append(extra, k)
				}
			}
			require.ElementsMatch(t, []string{"event_id", "span_id", "schema_version"}, extra)

			gotKeys, seedKeys := objectKeys(t, gotJSON), objectKeys(t, seedJSON)
			require.Equal(t, seedKeys, gotKeys[:len(seedKeys)])
		})
	}
}

// objectKeys returns the keys of the JSON object data, in order.
func objectKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('{'), tok)
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	return keys
}

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{
			name: "retry_attempt zero fields are present",
			e:    Event{Type: TypeRetryAttempt},
			want: `{"event_type":"retry_attempt","retry_category":"","operation":"","attempt_number":0,"max_attempts":0,"delay_seconds":0,"exception_type":"","exception_message":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "retry_exhausted zero fields are present and stop_reason omitted",
			e:    Event{Type: TypeRetryExhausted},
			want: `{"event_type":"retry_exhausted","retry_category":"","operation":"","total_attempts":0,"final_exception_type":"","final_exception_message":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "retry_exhausted with stop_reason",
			e:    Event{Type: TypeRetryExhausted, StopReason: "permanent", SchemaVersion: 7},
			want: `{"event_type":"retry_exhausted","retry_category":"","operation":"","total_attempts":0,"final_exception_type":"","final_exception_message":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","stop_reason":"permanent","span_id":"","event_id":"","schema_version":7}`,
		},
		{
			name: "idempotency zero fields are present",
			e:    Event{Type: TypeIdempotency},
			want: `{"event_type":"idempotency","retry_category":"","operation":"","idempotency_key":"","action":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "fields of other types are not written",
			e: Event{
				Type: TypeIdempotency, AttemptNumber: 4, DelaySeconds: 2, ExceptionType: "x",
				TotalAttempts: 4, StopReason: "exhausted", IdempotencyKey: "k", Action: ActionRecord,
			},
			want: `{"event_type":"idempotency","retry_category":"","operation":"","idempotency_key":"k","action":"record","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "other type writes only non-zero specific fields",
			e: Event{
				Type: "manual_override", Category: "JOB", Operation: "requeue job 42",
				AttemptNumber: 3, StopReason: "operator", Action: "requeue",
				TenantID: "t", Timestamp: seedTime,
			},
			want: `{"event_type":"manual_override","retry_category":"JOB","operation":"requeue job 42","attempt_number":3,"stop_reason":"operator","action":"requeue","tenant_id":"t","correlation_id":"","trace_id":"","timestamp":"2026-01-25T21:15:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "other type with every specific field",
			e: Event{
				Type: "job_state", AttemptNumber: 1, MaxAttempts: 2, DelaySeconds: 0.5,
				ExceptionType: "a", ExceptionMessage: "b", TotalAttempts: 3,
				FinalExceptionType: "c", FinalExceptionMessage: "d", StopReason: "e",
				IdempotencyKey: "f", Action: "g",
			},
			want: `{"event_type":"job_state","retry_category":"","operation":"","attempt_number":1,"max_attempts":2,"delay_seconds":0.5,"exception_type":"a","exception_message":"b","total_attempts":3,"final_exception_type":"c","final_exception_message":"d","stop_reason":"e","idempotency_key":"f","action":"g","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "other type with an infinite delay drops it",
			e:    Event{Type: "x", DelaySeconds: math.Inf(1)},
			want: `{"event_type":"x","retry_category":"","operation":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "timestamp is UTC with fractional seconds",
			e: Event{
				Type:      "x",
				Timestamp: time.Date(2026, 1, 25, 22, 15, 0, 120_000_000, time.FixedZone("CET", 3600)),
			},
			want: `{"event_type":"x","retry_category":"","operation":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"2026-01-25T21:15:00.12Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "additional_context sorted and last",
			e: Event{
				Type:              "x",
				AdditionalContext: map[string]any{"z": 1, "a": "<&>", "m": map[string]any{"y": true, "b": nil}},
			},
			want: `{"event_type":"x","retry_category":"","operation":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1,"additional_context":{"a":"<&>","m":{"b":null,"y":true},"z":1}}`,
		},
		{
			name: "empty additional_context omitted",
			e:    Event{Type: "x", AdditionalContext: map[string]any{}},
			want: `{"event_type":"x","retry_category":"","operation":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1}`,
		},
		{
			name: "unencodable additional_context value becomes an error string",
			e:    Event{Type: "x", AdditionalContext: map[string]any{"ch": make(chan int), "nan": math.NaN(), "ok": 1}},
			want: `{"event_type":"x","retry_category":"","operation":"","tenant_id":"","correlation_id":"","trace_id":"","timestamp":"0001-01-01T00:00:00Z","span_id":"","event_id":"","schema_version":1,"additional_context":{"ch":"audit: unencodable value: json: unsupported type: chan int","nan":"audit: unencodable value: json: unsupported value: NaN","ok":1}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.e.AppendJSON(nil)
			require.True(t, json.Valid(got), "invalid JSON: %s", got)
			require.Equal(t, tt.want, string(got))

			viaMarshal, err := tt.e.MarshalJSON()
			require.NoError(t, err)
			require.Equal(t, tt.want, string(viaMarshal))
		})
	}
}

func TestAppendJSONAppends(t *testing.T) {
	e := goldenEvents()["retry_attempt"]
	got := e.AppendJSON([]byte("prefix:"))
	require.Equal(t, "prefix:"+string(e.AppendJSON(nil)), string(got))
}

func TestAppendJSONDelaySeconds(t *testing.T) {
	tests := []struct {
		name  string
		delay float64
		want  string
	}{
		{name: "zero", delay: 0, want: "0"},
		{name: "shortest", delay: 1.05, want: "1.05"},
		{name: "integer", delay: 60, want: "60"},
		{name: "small", delay: 0.000001, want: "0.000001"},
		{name: "large", delay: 1e21, want: "1000000000000000000000"},
		{name: "NaN", delay: math.NaN(), want: "0"},
		{name: "+Inf", delay: math.Inf(1), want: "0"},
		{name: "-Inf", delay: math.Inf(-1), want: "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Event{Type: TypeRetryAttempt, DelaySeconds: tt.delay}.AppendJSON(nil)
			require.True(t, json.Valid(got), "invalid JSON: %s", got)
			require.Contains(t, string(got), `,"delay_seconds":`+tt.want+`,`)
		})
	}
}

func TestJSONRoundTrip(t *testing.T) {
	golden := goldenEvents()
	exhaustedWithReason := golden["retry_exhausted"]
	exhaustedWithReason.StopReason = "deadline"
	tests := []struct {
		name string
		e    Event
	}{
		{name: "retry_attempt", e: golden["retry_attempt"]},
		{name: "retry_exhausted", e: golden["retry_exhausted"]},
		{name: "retry_exhausted with stop_reason", e: exhaustedWithReason},
		{name: "idempotency", e: golden["idempotency"]},
		{
			name: "other type",
			e: Event{
				Type: "manual_override", Category: "JOB", Operation: "requeue job 42",
				AttemptNumber: 3, MaxAttempts: 8, DelaySeconds: 0.25, ExceptionType: "E",
				ExceptionMessage: "m", TotalAttempts: 3, FinalExceptionType: "F",
				FinalExceptionMessage: "fm", StopReason: "operator", IdempotencyKey: "k",
				Action: "requeue", TenantID: "t", CorrelationID: "c", TraceID: "tr",
				SpanID: "s", Timestamp: time.Date(2026, 2, 1, 3, 4, 5, 6, time.UTC),
				EventID: NewEventID(), SchemaVersion: 1,
				AdditionalContext: map[string]any{
					"by": "alice", "n": 2.5, "ok": true, "nested": map[string]any{"l": []any{"a", 1.0}},
				},
			},
		},
		{
			name: "escaped strings",
			e: Event{
				Type: TypeRetryAttempt, Operation: "quote \" backslash \\ tab \t nl \n <&> \u2028 é 日本",
				ExceptionMessage: "\x00\x1f\x7f", Timestamp: seedTime, SchemaVersion: 1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := json.Marshal(tt.e)
			require.NoError(t, err)
			var got Event
			require.NoError(t, json.Unmarshal(data, &got))
			require.Equal(t, tt.e, got)
		})
	}
}

func TestUnmarshalJSON(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Event
		wantErr string
	}{
		{
			name: "zero schema_version is written as the current one",
			data: string(Event{Type: "x"}.AppendJSON(nil)),
			want: Event{Type: "x", SchemaVersion: SchemaVersion},
		},
		{
			name: "unknown fields ignored and missing ones zero",
			data: `{"event_type":"retry_attempt","attempt_number":2,"new_field":{"a":1}}`,
			want: Event{Type: TypeRetryAttempt, AttemptNumber: 2},
		},
		{
			name: "timestamp with offset",
			data: `{"timestamp":"2026-01-25T22:15:00+01:00"}`,
			want: Event{Timestamp: time.Date(2026, 1, 25, 22, 15, 0, 0, time.FixedZone("", 3600))},
		},
		{name: "not JSON", data: `{`, wantErr: "audit: decode event: "},
		{name: "not an object", data: `[1]`, wantErr: "audit: decode event: "},
		{name: "wrong type", data: `{"attempt_number":"2"}`, wantErr: "audit: decode event: "},
		{name: "bad timestamp", data: `{"timestamp":"yesterday"}`, wantErr: "audit: decode event: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got Event
			err := got.UnmarshalJSON([]byte(tt.data))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.True(t, tt.want.Timestamp.Equal(got.Timestamp), "timestamp %v, want %v", got.Timestamp, tt.want.Timestamp)
			got.Timestamp, tt.want.Timestamp = time.Time{}, time.Time{}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestUnmarshalJSONNull(t *testing.T) {
	got := Event{Type: "kept"}
	require.NoError(t, json.Unmarshal([]byte(`null`), &got))
	require.Equal(t, Event{Type: "kept"}, got)
}

// encodingJSON returns what encoding/json writes for s with HTML escaping
// off, the behaviour appendString copies.
func encodingJSON(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	return strings.TrimSuffix(buf.String(), "\n")
}

func TestAppendString(t *testing.T) {
	tests := []struct {
		name string
		s    string
		want string
	}{
		{name: "empty", s: "", want: `""`},
		{name: "plain", s: "Connection timeout", want: `"Connection timeout"`},
		{name: "quote and backslash", s: `a"b\c`, want: `"a\"b\\c"`},
		{name: "named controls", s: "\n\r\t\b\f", want: `"\n\r\t\b\f"`},
		{name: "other controls", s: "\x00\x01\x1f", want: `"\u0000\u0001\u001f"`},
		{name: "DEL kept", s: "\x7f", want: "\"\x7f\""},
		{name: "HTML kept", s: "<a&b>", want: `"<a&b>"`},
		{name: "line separators", s: "a\u2028b\u2029c", want: `"a\u2028b\u2029c"`},
		{name: "multibyte kept", s: "é日本🙂", want: `"é日本🙂"`},
		{name: "invalid byte", s: "a\xffb", want: `"a\ufffdb"`},
		{name: "truncated rune", s: "ab\xe6\x97", want: `"ab\ufffd\ufffd"`},
		{name: "surrogate half", s: "\xed\xa0\x80", want: `"\ufffd\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(appendString(nil, tt.s))
			require.Equal(t, tt.want, got)
			require.Equal(t, encodingJSON(t, tt.s), got)
		})
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\x00\n\"\\", "<&>", "\u2028", "\xff\xfe", "é\xe6\x97日"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendString(nil, s)
		require.Equal(t, encodingJSON(t, s), string(got))
	})
}

func FuzzEventJSON(f *testing.F) {
	f.Add("retry_attempt", "op", "msg", 2, 1.05, int64(0))
	f.Add("retry_exhausted", "\xff", "\u2028", -1, math.Inf(1), int64(1e18))
	f.Add("other", "", "", 0, math.NaN(), int64(-1e18))
	f.Fuzz(func(t *testing.T, typ, op, msg string, n int, delay float64, nanos int64) {
		e := Event{
			Type: Type(typ), Operation: op, ExceptionMessage: msg, FinalExceptionMessage: msg,
			AttemptNumber: n, TotalAttempts: n, DelaySeconds: delay,
			Timestamp: time.Unix(0, nanos).UTC(), SchemaVersion: 1,
		}
		data := e.AppendJSON(nil)
		require.True(t, json.Valid(data), "invalid JSON: %q", data)
		var got Event
		require.NoError(t, json.Unmarshal(data, &got))
		require.True(t, e.Timestamp.Equal(got.Timestamp))
		if utf8.ValidString(typ) && utf8.ValidString(op) {
			require.Equal(t, e.Type, got.Type)
			require.Equal(t, e.Operation, got.Operation)
		}
	})
}

// benchEvents are the events of BenchmarkAppendJSON.
func benchEvents() []struct {
	name string
	e    Event
} {
	g := goldenEvents()
	withContext := g["retry_attempt"]
	withContext.AdditionalContext = map[string]any{"subject": "exoarmur.audit.append.v1", "bytes": 512}
	return []struct {
		name string
		e    Event
	}{
		{name: "retry_attempt", e: g["retry_attempt"]},
		{name: "retry_exhausted", e: g["retry_exhausted"]},
		{name: "idempotency", e: g["idempotency"]},
		{name: "retry_attempt_with_context", e: withContext},
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	for _, bb := range benchEvents() {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				buf = bb.e.AppendJSON(buf[:0])
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}

func BenchmarkMarshalJSON(b *testing.B) {
	e := goldenEvents()["retry_attempt"]
	b.Run("MarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for b.Loop() {
			out, _ = e.MarshalJSON()
		}
		b.SetBytes(int64(len(out)))
	})
	b.Run("encoding_json_struct", func(b *testing.B) {
		// For comparison: encoding/json on the decoding form.
		b.ReportAllocs()
		a := eventJSON{
			Type: e.Type, Category: e.Category, Operation: e.Operation,
			AttemptNumber: e.AttemptNumber, MaxAttempts: e.MaxAttempts, DelaySeconds: e.DelaySeconds,
			ExceptionType: e.ExceptionType, ExceptionMessage: e.ExceptionMessage,
			TenantID: e.TenantID, CorrelationID: e.CorrelationID, TraceID: e.TraceID,
			SpanID: e.SpanID, Timestamp: e.Timestamp, EventID: e.EventID, SchemaVersion: e.SchemaVersion,
		}
		var out []byte
		for b.Loop() {
			out, _ = json.Marshal(a)
		}
		b.SetBytes(int64(len(out)))
	})
}
