package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/internal/natstest"
)

// recordStore returns a KV store on the default bucket of a fresh server,
// with a clock the test sets.
func recordStore(t *testing.T, opts ...natstest.Option) (*natstest.Server, jetstream.JetStream, *idempotency.KV, *time.Time) {
	t.Helper()
	s := natstest.Start(t, opts...)
	_, js := s.JetStream(t)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Now: func() time.Time { return clock }})
	require.NoError(t, err)
	return s, js, kv, &clock
}

// completedRecord stores a completed record and returns its key.
func completedRecord(t *testing.T, kv *idempotency.KV, clock *time.Time) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key, err := idempotency.Key("charge", "tenant-1", "corr-1", map[string]any{"amount_cents": 4200})
	require.NoError(t, err)
	c, err := kv.Claim(ctx, key, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", time.Minute)
	require.NoError(t, err)
	*clock = clock.Add(1500 * time.Millisecond)
	require.NoError(t, kv.Complete(ctx, c, []byte(`{"charge_id":"ch_1","amount_cents":4200,"note":"<ok>"}`)))
	return key
}

// manualOverrides returns the manual_override events of the audit stream.
func manualOverrides(t *testing.T, js jetstream.JetStream) []audit.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	events, err := audit.Query(ctx, js, audit.StreamConfig{}, audit.Filter{Types: []audit.Type{typeManualOverride}})
	require.NoError(t, err)
	return events
}

func TestIdempotencyGetGolden(t *testing.T) {
	s, _, kv, clock := recordStore(t)
	key := completedRecord(t, kv, clock)

	code, out, errOut := run(t, "idempotency", "get", key, "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "idempotency_get.json", out)
	var got recordJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.JSONEq(t, `{"charge_id":"ch_1","amount_cents":4200,"note":"<ok>"}`, string(got.Result), "the result is raw JSON")

	code, out, errOut = run(t, "idempotency", "get", "--server", s.URL(), key)
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "idempotency_get.txt", out)
}

func TestIdempotencyGetInProgress(t *testing.T) {
	s, _, kv, clock := recordStore(t)
	*clock = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := strings.Repeat("0f", 32)
	c, err := kv.Claim(ctx, key, "fp", time.Hour)
	require.NoError(t, err)

	code, out, errOut := run(t, "idempotency", "get", key, "--server", s.URL())
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "state:        in_progress\n")
	require.Contains(t, out, "owner:        "+c.Owner+"\n")
	require.Contains(t, out, "(live for ")

	code, out, _ = run(t, "idempotency", "get", key, "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code)
	var got recordJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, c.Owner, got.Owner)
	require.True(t, got.LeaseUntil.Equal(c.LeaseUntil))
	require.Equal(t, c.Revision, got.Revision)
}

func TestIdempotencyGetFailures(t *testing.T) {
	s, js, _, _ := recordStore(t)
	key := strings.Repeat("ab", 32)

	code, out, errOut := run(t, "idempotency", "get", key, "--server", s.URL())
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry idempotency get: no idempotency record for key "+key+" in bucket JETRETRY_IDEMPOTENCY\n", errOut)

	code, _, errOut = run(t, "idempotency", "get", key, "--server", s.URL(), "--bucket", "NOPE")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "jetretry idempotency get: idempotency bucket NOPE not found at "+s.URL())
	requireOneLine(t, errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.KeyValue(ctx, "NOPE")
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "get never creates a bucket")

	bucket, err := js.KeyValue(ctx, idempotency.DefaultKVBucket)
	require.NoError(t, err)
	_, err = bucket.Put(ctx, key, []byte("not a record"))
	require.NoError(t, err)
	code, _, errOut = run(t, "idempotency", "get", key, "--server", s.URL())
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "the record of key "+key+" (revision 1) is corrupt")
	require.Contains(t, errOut, `"jetretry idempotency clear `+key+`" removes it`)
	requireOneLine(t, errOut)
}

func TestIdempotencyClear(t *testing.T) {
	s, js, kv, clock := recordStore(t)
	key := completedRecord(t, kv, clock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	before := time.Now().Add(-time.Second)
	code, out, errOut := run(t, "idempotency", "clear", key, "--server", s.URL(), "--tenant", "tenant-1",
		"--correlation", "corr-1", "--reason", "refunded by hand")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "cleared key "+key+" from bucket JETRETRY_IDEMPOTENCY (it was completed, revision 2)\n")
	require.Contains(t, out, "audited: manual_override event ")
	require.Contains(t, out, " on jetretry.audit.manual_override.MANUAL (stream JETRETRY_AUDIT, sequence 1)\n")

	_, err := kv.Get(ctx, key)
	require.ErrorIs(t, err, idempotency.ErrNotFound, "the record is gone")

	events := manualOverrides(t, js)
	require.Len(t, events, 1, "the audit stream was created and holds the override")
	e := events[0]
	require.Equal(t, typeManualOverride, e.Type)
	require.Equal(t, "MANUAL", e.Category)
	require.Equal(t, "idempotency clear", e.Operation)
	require.Equal(t, key, e.IdempotencyKey)
	require.Equal(t, actionClear, e.Action)
	require.Equal(t, "tenant-1", e.TenantID)
	require.Equal(t, "corr-1", e.CorrelationID)
	require.WithinRange(t, e.Timestamp, before, time.Now())
	require.Equal(t, "refunded by hand", e.AdditionalContext["reason"])
	require.Equal(t, "completed", e.AdditionalContext["previous_state"])
	require.EqualValues(t, 2, e.AdditionalContext["previous_revision"])
	require.Equal(t, idempotency.DefaultKVBucket, e.AdditionalContext["bucket"])

	// Stored once, under its event id, in the "other type" JSON shape.
	st, err := js.Stream(ctx, audit.DefaultStreamName)
	require.NoError(t, err)
	msg, err := st.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, e.EventID, msg.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, "jetretry.audit.manual_override.MANUAL", msg.Subject)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(msg.Data, &raw))
	require.Equal(t, "clear", raw["action"])
	require.Equal(t, key, raw["idempotency_key"])
	require.NotContains(t, raw, "attempt_number")
	require.NotContains(t, raw, "total_attempts")

	// It shows up in the audit commands.
	code, out, _ = run(t, "audit", "query", "--server", s.URL(), "--type", "manual_override", "--category", "MANUAL")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "idempotency clear")
	require.Contains(t, out, "clear key="+key)

	// Clearing again: nothing to clear, nothing audited.
	code, out, errOut = run(t, "idempotency", "clear", key, "--server", s.URL())
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry idempotency clear: no idempotency record for key "+key+" in bucket JETRETRY_IDEMPOTENCY\n", errOut)
	require.Len(t, manualOverrides(t, js), 1)
}

func TestIdempotencyClearJSONCategoryAndCorrupt(t *testing.T) {
	s, js, _, _ := recordStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// An existing audit stream is used as it is.
	_, err := audit.EnsureStream(ctx, js, audit.StreamConfig{MaxAge: 48 * time.Hour})
	require.NoError(t, err)
	bucket, err := js.KeyValue(ctx, idempotency.DefaultKVBucket)
	require.NoError(t, err)
	key := strings.Repeat("ee", 32)
	_, err = bucket.Put(ctx, key, []byte("{corrupt"))
	require.NoError(t, err)

	code, out, errOut := run(t, "idempotency", "clear", key, "--server", s.URL(), "--category", "KV_PUT", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var got struct {
		Cleared          bool        `json:"cleared"`
		Key              string      `json:"key"`
		PreviousState    string      `json:"previous_state"`
		PreviousRevision uint64      `json:"previous_revision"`
		Event            audit.Event `json:"event"`
		Stream           string      `json:"stream"`
		Sequence         uint64      `json:"sequence"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.True(t, got.Cleared)
	require.Equal(t, key, got.Key)
	require.Equal(t, "corrupt", got.PreviousState)
	require.EqualValues(t, 1, got.PreviousRevision)
	require.Equal(t, "RETRY_KV_PUT", got.Event.Category)
	require.Equal(t, audit.DefaultStreamName, got.Stream)

	events := manualOverrides(t, js)
	require.Len(t, events, 1)
	require.Equal(t, got.Event.EventID, events[0].EventID)

	st, err := js.Stream(ctx, audit.DefaultStreamName)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, 48*time.Hour, info.Config.MaxAge, "the stream's settings are left alone")
}

func TestIdempotencyClearLiveClaimNeedsForce(t *testing.T) {
	s, js, kv, clock := recordStore(t)
	*clock = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	key := strings.Repeat("1a", 32)
	c, err := kv.Claim(ctx, key, "fp", time.Hour)
	require.NoError(t, err)

	code, _, errOut := run(t, "idempotency", "clear", key, "--server", s.URL())
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "key "+key+" is in progress, owned by "+c.Owner)
	require.Contains(t, errOut, "--force clears it anyway")
	requireOneLine(t, errOut)
	_, err = kv.Get(ctx, key)
	require.NoError(t, err, "the record stays")
	_, err = js.Stream(ctx, audit.DefaultStreamName)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "nothing was audited")

	code, out, errOut := run(t, "idempotency", "clear", key, "--server", s.URL(), "--force")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "(it was in_progress, revision 1)")
	_, err = kv.Get(ctx, key)
	require.ErrorIs(t, err, idempotency.ErrNotFound)
	events := manualOverrides(t, js)
	require.Len(t, events, 1)
	require.Equal(t, "in_progress", events[0].AdditionalContext["previous_state"])
}

func TestIdempotencyUserPassword(t *testing.T) {
	s, _, kv, clock := recordStore(t, natstest.WithUser("ops", "pw"))
	key := completedRecord(t, kv, clock)
	code, out, errOut := run(t, "idempotency", "get", key, "--server", s.URL(), "--user", "ops", "--password", "pw", "--json")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, `"state": "completed"`)

	code, _, errOut = run(t, "idempotency", "get", key, "--server", s.URL(), "--timeout", "500ms")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "cannot reach NATS at "+s.URL())
	requireOneLine(t, errOut)
}

func TestIdempotencyBucketSettingsKept(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: "ORDERS_IDEM", TTL: time.Hour, Now: func() time.Time { return clock }})
	require.NoError(t, err)
	key := completedRecord(t, kv, &clock)

	code, _, errOut := run(t, "idempotency", "get", key, "--server", s.URL(), "--bucket", "ORDERS_IDEM")
	require.Equal(t, ExitOK, code, errOut)
	code, _, errOut = run(t, "idempotency", "clear", key, "--server", s.URL(), "--bucket", "ORDERS_IDEM")
	require.Equal(t, ExitOK, code, errOut)

	bucket, err := js.KeyValue(ctx, "ORDERS_IDEM")
	require.NoError(t, err)
	st, err := bucket.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, time.Hour, st.TTL(), "the bucket's settings are left alone")
	events := manualOverrides(t, js)
	require.Len(t, events, 1)
	require.Equal(t, "ORDERS_IDEM", events[0].AdditionalContext["bucket"])
}
