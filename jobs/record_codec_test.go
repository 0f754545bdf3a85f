package jobs

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/retry"
)

// stdJSON is what encoding/json writes for r without HTML escaping.
func stdJSON(t testing.TB, r *Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(r))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func codecRecords() []Record {
	t0 := time.Date(2026, 11, 22, 3, 4, 5, 123456789, time.UTC)
	ist := time.FixedZone("", 5*3600+30*60)
	run := Run{
		RunID: "01a200f3-779a-7f24-b061-2c9996044d03", Owner: "host:1:ab", Attempt: 2, Reprocess: true,
		StartedAt: t0, LeaseUntil: t0.Add(30 * time.Second), EndedAt: t0.Add(time.Second).In(ist),
		Outcome: OutcomeFailed, Error: `boom <&> "quoted" \ back` + "\n\t\x01 \u2028 é 🚀 \xff", ErrorType: "*errors.errorString",
		ErrorClass: ClassRetryable,
	}
	return []Record{
		{Version: 1, ID: ID("k"), Queue: "q", Key: "k", Status: StatusPending, CreatedAt: t0, UpdatedAt: t0},
		{
			Version: 1, ID: ID("source/customer/query/2026-11-20"), Queue: "reports", Key: "source/customer/query/2026-11-20",
			Payload: []byte(`{"report":"daily","bin":"` + "\x00\xff" + `"}`), Status: StatusRunning,
			AttemptCount: 3, BudgetUsed: 2, CurrentRunID: "prev", Dispatch: "tok", Run: &run,
			LastError: "x", ErrorClass: ClassRateLimited, NextRetryAt: t0.Add(time.Hour),
			CreatedAt: t0.Add(-time.Hour), UpdatedAt: t0, Terminal: true, TerminalReason: TerminalMaxAttempts,
			Reprocess: true, History: []Run{run, {RunID: "r1", Attempt: 1, StartedAt: t0}}, HistoryDropped: 7,
			Policy: &retry.Policy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: time.Minute, Multiplier: 2, JitterFactor: 0.1},
		},
		{Version: 1, ID: "id", Queue: "q", Key: "", Payload: []byte{}, Status: StatusSuccess, CreatedAt: time.Time{}, UpdatedAt: t0.In(ist), History: []Run{}},
	}
}

func TestRecordCodecMatchesEncodingJSON(t *testing.T) {
	for i, r := range codecRecords() {
		got, ok := appendRecord(nil, &r)
		require.True(t, ok, "record %d", i)
		require.Equal(t, string(stdJSON(t, &r)), string(got), "record %d", i)
		checkDecode(t, got)
	}
}

func TestRecordCodecFallsBack(t *testing.T) {
	r := codecRecords()[0]
	r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	_, ok := appendRecord(nil, &r)
	require.False(t, ok, "year 10000")
	_, err := r.encode()
	require.Error(t, err, "encoding/json refuses it too")

	for _, doc := range []string{
		`{"version":1,"id":"a","queue":"q","key":"k","status":"pending","VERSION":2}`, // other spelling
		`{"version":1,"version":2}`,                              // repeated
		`{"version":1,"run":{"run_id":"a"},"run":{"owner":"b"}}`, // repeated object: encoding/json merges
		`{"version":1,"key":"a\u0041"}`,                          // escape
		`{"version":1,"key":null}`,                               // null
		`{"version":1.0}`,                                        // non-canonical number
		`{"version":1,"created_at":"2026-11-22T03:04:05.100Z"}`,  // non-canonical time
		`{"version":1,"payload":"YQ"}`,                           // unpadded base64
		`{"version":1,"history":[]}`,                             // empty, non-nil
		`{"version":1,"policy":{"max_attempts":2}}`,              // policy
		`{"version":1,"run":{"run_id":"a","Attempt":3}}`,         // other spelling in a run
	} {
		var r Record
		require.False(t, decodeRecordFast([]byte(doc), &r), doc)
		checkDecode(t, []byte(doc))
	}
}

// checkDecode checks that, when the fast path decodes doc, it reads what
// encoding/json reads.
func checkDecode(t testing.TB, doc []byte) {
	t.Helper()
	var fast, std Record
	if !decodeRecordFast(doc, &fast) {
		return
	}
	require.True(t, json.Valid(doc), "fast path read invalid JSON: %q", doc)
	require.NoError(t, json.Unmarshal(doc, &std), "fast path read a document encoding/json refuses: %s", doc)
	fb, err := json.Marshal(fast)
	require.NoError(t, err)
	sb, err := json.Marshal(std)
	require.NoError(t, err)
	require.Equal(t, string(sb), string(fb), "document %s", doc)
	require.Equal(t, std.Payload == nil, fast.Payload == nil)
	require.Equal(t, std.History == nil, fast.History == nil)
	require.Equal(t, std.Run == nil, fast.Run == nil)
	for i := range std.History {
		require.True(t, std.History[i].StartedAt.Equal(fast.History[i].StartedAt))
	}
}

func FuzzRecordDecode(f *testing.F) {
	for _, r := range codecRecords() {
		b, _ := appendRecord(nil, &r)
		f.Add(b)
	}
	f.Add([]byte(`{"version":1,"run":{}}`))
	f.Add([]byte(`{"version":1,"history":[{"run_id":"a","attempt":2},{"run_id":"b"}],"payload":"YWI="}`))
	f.Add([]byte(`{"key":"a","created_at":"2026-02-29T00:00:00Z","next_retry_at":"2026-11-22T03:04:05.1+05:30"}`))
	f.Fuzz(func(t *testing.T, doc []byte) { checkDecode(t, doc) })
}

func FuzzRecordEncode(f *testing.F) {
	f.Add("k", "q", []byte("p"), "err", "owner", int64(0), 3, true)
	f.Add("<&>\u2028", "\x00", []byte{}, "\xff\xfe", "", int64(-1)<<40, -5, false)
	f.Fuzz(func(t *testing.T, key, queue string, payload []byte, msg, owner string, nanos int64, n int, flag bool) {
		at := time.Unix(0, nanos).UTC()
		run := Run{RunID: key, Owner: owner, Attempt: n, Reprocess: flag, StartedAt: at, EndedAt: at, Error: msg, ErrorClass: ErrorClass(queue)}
		r := Record{
			Version: n, ID: key, Queue: queue, Key: key, Payload: payload, Status: Status(msg),
			AttemptCount: n, BudgetUsed: -n, Dispatch: owner, LastError: msg, NextRetryAt: at, CreatedAt: at,
			UpdatedAt: at, Terminal: flag, Reprocess: !flag, History: []Run{run}, HistoryDropped: n,
		}
		if flag {
			r.Run = &run
		}
		got, ok := appendRecord(nil, &r)
		if !ok {
			t.Skip("outside the fast path")
		}
		if string(got) != string(stdJSON(t, &r)) {
			t.Fatalf("got  %s\nwant %s", got, stdJSON(t, &r))
		}
		checkDecode(t, got)
	})
}
