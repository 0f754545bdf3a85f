package idempotency

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// encodeStd is the reference encoding: encoding/json without HTML escaping.
func encodeStd(t testing.TB, r kvRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(r))
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func TestRecordEncodingMatchesEncodingJSON(t *testing.T) {
	ts := time.Date(2026, 11, 21, 23, 59, 29, 123456789, time.UTC)
	records := []kvRecord{
		{V: 1, State: StateInProgress, Owner: "0193b1d2-0000-7000-8000-000000000000", LeaseUntil: ts, Fingerprint: "ab12", CreatedAt: ts, UpdatedAt: ts},
		{V: 1, State: StateCompleted, Fingerprint: "ab12", Result: json.RawMessage(`{"id":"o-1","html":"<&>"}`), CreatedAt: ts, UpdatedAt: ts.Add(time.Second)},
		{V: 1, State: StateFailed, Failure: "card \"declined\"\n\ttab \\ \x01 <b> é 日本 \xff", CreatedAt: ts.Truncate(time.Second), UpdatedAt: ts},
		{V: 1, State: StateCompleted, Result: json.RawMessage(`null`), CreatedAt: time.Time{}, UpdatedAt: ts},
		{V: 7, State: "weird state \u2028", CreatedAt: ts, UpdatedAt: ts},
	}
	for i, r := range records {
		want := encodeStd(t, r)
		got := appendRecord(nil, &r)
		require.Equal(t, string(want), string(got), "record %d", i)
	}
}

func TestRecordDecodingMatchesEncodingJSON(t *testing.T) {
	inputs := []string{
		`{"v":1,"state":"in_progress","owner":"o","lease_until":"2026-11-21T23:59:59Z","fingerprint":"f","created_at":"2026-11-21T23:59:29.5Z","updated_at":"2026-11-21T23:59:29Z"}`,
		` { "updated_at" : "2026-11-21T23:59:29Z" , "v" : 1 , "state":"completed","result": [1, {"a":"}\"]"}] ,"x":{"y":[true,null]}} `,
		`{"v":1,"state":"failed","failure":"with \"escape\""}`,
		`{"v":1,"State":"completed"}`,
		`{"v":1,"state":"completed","result":null}`,
		`{"v":1,"state":"completed","v":2}`,
		`{}`,
		`{"v":"1"}`,
		`{"v":1.5}`,
		`{"v":1,"created_at":"yesterday"}`,
		`{"v":1,"created_at":"2026-11-21T23:59:29+01:00"}`,
		`[1,2]`,
		`"str"`,
		`{"v":1,"owner":7}`,
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			checkDecodeEquivalence(t, []byte(in))
		})
	}
}

// checkDecodeEquivalence checks that the fast decoder, when it accepts a
// valid document, decodes exactly what encoding/json decodes.
func checkDecodeEquivalence(t testing.TB, in []byte) {
	if !json.Valid(in) {
		return
	}
	var fast kvRecord
	if !decodeRecordFast(in, &fast) {
		return // encoding/json decides
	}
	var std kvRecord
	err := json.Unmarshal(in, &std)
	require.NoError(t, err, "fast decoder accepted what encoding/json rejects: %s", in)
	require.True(t, std.LeaseUntil.Equal(fast.LeaseUntil) && std.CreatedAt.Equal(fast.CreatedAt) && std.UpdatedAt.Equal(fast.UpdatedAt), "times differ: %s", in)
	std.LeaseUntil, std.CreatedAt, std.UpdatedAt = fast.LeaseUntil, fast.CreatedAt, fast.UpdatedAt
	require.Equal(t, std, fast, "decoders differ on %s", in)
}

func FuzzRecordDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"state":"in_progress","owner":"o","lease_until":"2026-11-21T23:59:59Z","fingerprint":"f","created_at":"2026-11-21T23:59:29Z","updated_at":"2026-11-21T23:59:29Z"}`))
	f.Add([]byte(`{"v":1,"state":"completed","result":{"a":[1,"x\"y"]},"created_at":"2026-11-21T23:59:29.123Z","updated_at":"2026-11-21T23:59:29Z"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		checkDecodeEquivalence(t, in)
	})
}

func BenchmarkRecordCodec(b *testing.B) {
	ts := time.Now().UTC()
	r := kvRecord{V: 1, State: StateCompleted, Fingerprint: "4d2b7f1e9c0a3e5b6d8f1a2c4e6b8d0f", Result: json.RawMessage(`{"id":"o-1","total":99}`), CreatedAt: ts, UpdatedAt: ts}
	enc := appendRecord(nil, &r)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeKVRecord("k", 1, enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode_encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var x kvRecord
			if err := json.Unmarshal(enc, &x); err != nil {
				b.Fatal(err)
			}
		}
	})
}
