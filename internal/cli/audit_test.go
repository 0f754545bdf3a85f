package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
)

// auditBase is the time of the first fixture event.
var auditBase = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// auditFixture is a small history: two KV_GET calls (one retried to
// success, one exhausted), a permanent NATS_PUBLISH failure, idempotency
// events and a manual override, over two tenants.
func auditFixture() []audit.Event {
	ev := func(i int, e audit.Event) audit.Event {
		e.Timestamp = auditBase.Add(time.Duration(i) * time.Second)
		e.EventID = fmt.Sprintf("0194b3a0-0000-7000-8000-%012d", i)
		if e.TenantID == "" {
			e.TenantID = "tenant-1"
		}
		return e
	}
	attempt := func(n, max int, span, corr string) audit.Event {
		return audit.Event{Type: audit.TypeRetryAttempt, Category: "RETRY_KV_GET", Operation: "get kill switch",
			AttemptNumber: n, MaxAttempts: max, DelaySeconds: 0.5 * float64(n), ExceptionType: "nats.ErrTimeout",
			ExceptionMessage: "nats: timeout", SpanID: span, CorrelationID: corr}
	}
	return []audit.Event{
		// Every attempt has its own span.
		ev(0, attempt(1, 3, "span-a1", "corr-a")),
		ev(1, attempt(2, 3, "span-a2", "corr-a")),
		ev(2, attempt(1, 3, "span-b1", "corr-b")),
		ev(3, attempt(2, 3, "span-b2", "corr-b")),
		ev(4, audit.Event{Type: audit.TypeRetryExhausted, Category: "RETRY_KV_GET", Operation: "get kill switch",
			TotalAttempts: 3, FinalExceptionType: "nats.ErrTimeout", FinalExceptionMessage: "nats: timeout",
			StopReason: "exhausted", SpanID: "span-b3", CorrelationID: "corr-b"}),
		ev(5, audit.Event{Type: audit.TypeRetryExhausted, Category: "RETRY_NATS_PUBLISH", Operation: "publish orders.created",
			TotalAttempts: 1, FinalExceptionType: "natsx.Error", FinalExceptionMessage: "permissions violation\nfor orders.created",
			StopReason: "permanent", SpanID: "span-c", CorrelationID: "corr-c"}),
		ev(6, audit.Event{Type: audit.TypeIdempotency, Category: "RETRY_KV_PUT", Operation: "charge",
			IdempotencyKey: strings.Repeat("ab", 32), Action: audit.ActionRecord, TenantID: "tenant-2", CorrelationID: "corr-d"}),
		ev(7, audit.Event{Type: audit.TypeIdempotency, Category: "RETRY_KV_PUT", Operation: "charge",
			IdempotencyKey: strings.Repeat("ab", 32), Action: audit.ActionHit, TenantID: "tenant-2", CorrelationID: "corr-d"}),
		ev(8, audit.Event{Type: typeManualOverride, Category: manualCategory, Operation: "idempotency clear",
			IdempotencyKey: strings.Repeat("cd", 32), Action: actionClear, CorrelationID: "corr-e",
			AdditionalContext: map[string]any{"reason": "refunded by hand", "previous_state": "completed"}}),
	}
}

// publishEvents publishes events to the audit stream as a Publisher does:
// on their subject, with the event id as Nats-Msg-Id.
func publishEvents(t *testing.T, js jetstream.JetStream, events ...audit.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, e := range events {
		msg := &nats.Msg{Subject: audit.Subject(audit.DefaultSubjectPrefix, e), Data: e.AppendJSON(nil), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, e.EventID)
		_, err := js.PublishMsg(ctx, msg)
		require.NoError(t, err)
	}
}

// auditServer starts a server with the audit stream holding events.
func auditServer(t *testing.T, events ...audit.Event) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := audit.EnsureStream(ctx, js, audit.StreamConfig{})
	require.NoError(t, err)
	publishEvents(t, js, events...)
	return s, js
}

// eventIDs decodes JSON lines of events and returns their ids.
func eventIDs(t *testing.T, jsonLines string) []string {
	t.Helper()
	ids := []string{}
	sc := bufio.NewScanner(strings.NewReader(jsonLines))
	for sc.Scan() {
		var e audit.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		ids = append(ids, e.EventID)
	}
	return ids
}

func fixtureIDs(idx ...int) []string {
	ids := []string{}
	for _, i := range idx {
		ids = append(ids, fmt.Sprintf("0194b3a0-0000-7000-8000-%012d", i))
	}
	return ids
}

func TestAuditQueryGolden(t *testing.T) {
	s, _ := auditServer(t, auditFixture()...)

	code, out, errOut := run(t, "audit", "query", "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "audit_query.jsonl", out)
	var want strings.Builder
	for _, e := range auditFixture() {
		want.Write(e.AppendJSON(nil))
		want.WriteByte('\n')
	}
	require.Equal(t, want.String(), out, "each line is the event's AppendJSON")

	code, out, errOut = run(t, "audit", "query", "--server", s.URL())
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "audit_query.txt", out)
}

func TestAuditQueryFilters(t *testing.T) {
	s, _ := auditServer(t, auditFixture()...)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"all", nil, fixtureIDs(0, 1, 2, 3, 4, 5, 6, 7, 8)},
		{"type", []string{"--type", "retry_exhausted"}, fixtureIDs(4, 5)},
		{"types repeated", []string{"--type", "retry_exhausted", "--type", "idempotency"}, fixtureIDs(4, 5, 6, 7)},
		{"types comma", []string{"--type", "retry_exhausted,manual_override"}, fixtureIDs(4, 5, 8)},
		{"category code", []string{"--category", "RETRY_NATS_PUBLISH"}, fixtureIDs(5)},
		{"category names", []string{"--category", "KV_PUT,NATS_PUBLISH"}, fixtureIDs(5, 6, 7)},
		{"category manual", []string{"--category", "MANUAL"}, fixtureIDs(8)},
		{"type and category", []string{"--type", "retry_attempt", "--category", "KV_GET"}, fixtureIDs(0, 1, 2, 3)},
		{"tenant", []string{"--tenant", "tenant-2"}, fixtureIDs(6, 7)},
		{"correlation", []string{"--correlation", "corr-b"}, fixtureIDs(2, 3, 4)},
		{"since", []string{"--since", "2026-01-02T03:04:12Z"}, fixtureIDs(7, 8)},
		{"until", []string{"--until", "2026-01-02T03:04:07Z"}, fixtureIDs(0, 1)},
		{"since and until", []string{"--since", "2026-01-02T03:04:07Z", "--until", "2026-01-02T03:04:09Z"}, fixtureIDs(2, 3)},
		{"since date", []string{"--since", "2026-01-02"}, fixtureIDs(0, 1, 2, 3, 4, 5, 6, 7, 8)},
		{"until date", []string{"--until", "2026-01-02"}, fixtureIDs()},
		{"since duration", []string{"--since", "1h"}, fixtureIDs()},
		{"limit", []string{"--limit", "2"}, fixtureIDs(7, 8)},
		{"limit larger", []string{"--limit", "20", "--tenant", "tenant-2"}, fixtureIDs(6, 7)},
		{"nothing", []string{"--tenant", "nobody"}, fixtureIDs()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"audit", "query", "--server", s.URL(), "--json"}, tt.args...)...)
			require.Equal(t, ExitOK, code, errOut)
			require.Empty(t, errOut)
			require.Equal(t, tt.want, eventIDs(t, out))
		})
	}

	code, out, errOut := run(t, "audit", "query", "--server", s.URL(), "--tenant", "nobody")
	require.Equal(t, ExitOK, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry audit query: no matching events\n", errOut)
}

func TestAuditQuerySkipsUndecodable(t *testing.T) {
	s, js := auditServer(t, auditFixture()[:2]...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := js.Publish(ctx, audit.DefaultSubjectPrefix+".retry_attempt.RETRY_KV_GET", []byte("not json"))
	require.NoError(t, err)

	code, out, errOut := run(t, "audit", "query", "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code)
	require.Equal(t, fixtureIDs(0, 1), eventIDs(t, out))
	require.Contains(t, errOut, "jetretry audit query: warning: audit: 1 undecodable messages skipped")
	requireOneLine(t, errOut)
}

func TestAuditStats(t *testing.T) {
	events := auditFixture()
	s, _ := auditServer(t, events...)

	code, out, errOut := run(t, "audit", "stats", "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "audit_stats.json", out)
	var rows []statsRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Equal(t, statsRows(audit.ComputeStats(events)), rows, "the stats recomputed from the events")
	require.Len(t, rows, 3, "the manual override's category has nothing to count")
	require.Equal(t, []string{"RETRY_NATS_PUBLISH", "RETRY_KV_GET", "RETRY_KV_PUT"},
		[]string{rows[0].Category, rows[1].Category, rows[2].Category}, "seed 002's order")
	require.Equal(t, statsRow{
		Category: "RETRY_KV_GET", Attempts: 4, Exhaustions: 1, CallsWithFailures: 2, FailedCalls: 1,
		SuccessRate: 0.5, AvgAttempts: 3,
	}, rows[1])

	code, out, errOut = run(t, "audit", "stats", "--server", s.URL())
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "audit_stats.txt", out)

	code, out, _ = run(t, "audit", "stats", "--server", s.URL(), "--json", "--category", "KV_GET", "--correlation", "corr-a")
	require.Equal(t, ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Equal(t, []statsRow{{Category: "RETRY_KV_GET", Attempts: 2, CallsWithFailures: 1, SuccessRate: 1, AvgAttempts: 3}}, rows)

	code, out, _ = run(t, "audit", "stats", "--server", s.URL(), "--json", "--since", "1m")
	require.Equal(t, ExitOK, code)
	require.Equal(t, "[]\n", out)
	code, out, _ = run(t, "audit", "stats", "--server", s.URL(), "--since", "1m")
	require.Equal(t, ExitOK, code)
	require.Equal(t, "no retry or idempotency events match\n", out)
}

func TestAuditStreamNotFound(t *testing.T) {
	s := natstest.Start(t)
	for _, sub := range []string{"query", "stats", "tail"} {
		t.Run(sub, func(t *testing.T) {
			code, out, errOut := run(t, "audit", sub, "--server", s.URL())
			require.Equal(t, ExitFailure, code)
			require.Empty(t, out)
			require.Equal(t, "jetretry audit "+sub+": audit stream JETRETRY_AUDIT not found at "+s.URL()+
				" (run a service, or \"jetretry demo --server URL\", first)\n", errOut)
		})
	}
	code, _, errOut := run(t, "audit", "query", "--server", s.URL(), "--stream", "OTHER")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "audit stream OTHER not found")
}

// waitConsumer waits until the audit stream has a consumer: a tail has
// started reading.
func waitConsumer(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := js.Stream(ctx, audit.DefaultStreamName)
		if err != nil {
			return false
		}
		info, err := st.Info(ctx)
		return err == nil && info.State.Consumers > 0
	}, 10*time.Second, 10*time.Millisecond)
}

func TestAuditTail(t *testing.T) {
	fixture := auditFixture()
	s, js := auditServer(t, fixture[0])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, done := background(ctx, "audit", "tail", "--server", s.URL(), "--type", "retry_exhausted,idempotency", "--tenant", "tenant-1")
	waitConsumer(t, js)
	publishEvents(t, js, fixture[1:]...)
	line := string(appendEventLine(nil, fixture[5])) + "\n"
	require.Eventually(t, func() bool { return strings.Contains(stdout.String(), line) }, 10*time.Second, 10*time.Millisecond,
		"stdout: %s\nstderr: %s", stdout, stderr)
	cancel()
	require.Equal(t, ExitOK, waitExit(t, done), stderr.String())
	require.Empty(t, stderr.String())
	want := string(appendEventLine(nil, fixture[4])) + "\n" + line
	require.Equal(t, want, stdout.String(), "only the live events that match, in order")
	require.Equal(t,
		"2026-01-02T03:04:10.000Z  retry_exhausted  RETRY_NATS_PUBLISH           publish orders.created: "+
			"gave up after 1 attempts (permanent): natsx.Error: permissions violation for orders.created  tenant=tenant-1  correlation=corr-c\n",
		line)
}

func TestAuditTailJSONSince(t *testing.T) {
	fixture := auditFixture()
	s, js := auditServer(t, fixture[:4]...)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// --since replays the stored events from that time, then follows.
	stdout, stderr, done := background(ctx, "audit", "tail", "--server", s.URL(), "--json", "--since", "2026-01-02T03:04:06Z")
	require.Eventually(t, func() bool { return strings.Count(stdout.String(), "\n") == 3 }, 10*time.Second, 10*time.Millisecond,
		"stdout: %s\nstderr: %s", stdout, stderr)
	publishEvents(t, js, fixture[4:]...)
	require.Eventually(t, func() bool { return strings.Count(stdout.String(), "\n") == 8 }, 10*time.Second, 10*time.Millisecond,
		"stdout: %s\nstderr: %s", stdout, stderr)
	cancel()
	require.Equal(t, ExitOK, waitExit(t, done))
	require.Equal(t, fixtureIDs(1, 2, 3, 4, 5, 6, 7, 8), eventIDs(t, stdout.String()))
}

func TestAuditUserPassword(t *testing.T) {
	s := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := audit.EnsureStream(ctx, js, audit.StreamConfig{})
	require.NoError(t, err)
	publishEvents(t, js, auditFixture()...)

	code, out, errOut := run(t, "audit", "query", "--server", s.URL(), "--user", "alice", "--password", "s3cret", "--json", "--limit", "1")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, fixtureIDs(8), eventIDs(t, out))

	// Credentials in NATS_URL work too.
	t.Setenv("NATS_URL", strings.Replace(s.URL(), "nats://", "nats://alice:s3cret@", 1))
	code, _, errOut = run(t, "audit", "stats")
	require.Equal(t, ExitOK, code, errOut)

	code, out, errOut = run(t, "audit", "query", "--server", s.URL(), "--user", "alice", "--password", "wrong", "--timeout", "500ms")
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "jetretry audit query: cannot reach NATS at "+s.URL()+": ")
	require.Contains(t, errOut, "uthorization")
	require.NotContains(t, errOut, "wrong")
	requireOneLine(t, errOut)
}

func TestAuditLineAndDetail(t *testing.T) {
	tests := []struct {
		name string
		e    audit.Event
		want string
	}{
		{"attempt", auditFixture()[1], "attempt 2/3 failed, next in 1s: nats.ErrTimeout: nats: timeout"},
		{"exhausted without reason", audit.Event{Type: audit.TypeRetryExhausted, TotalAttempts: 2, FinalExceptionMessage: "boom"},
			"gave up after 2 attempts (exhausted): boom"},
		{"idempotency", auditFixture()[7], "hit key=" + strings.Repeat("ab", 32)},
		{"manual override", auditFixture()[8],
			"clear key=" + strings.Repeat("cd", 32) + " previous_state=completed reason=refunded by hand"},
		{"other type", audit.Event{Type: "job_state", Action: "requeue", AdditionalContext: map[string]any{"n": 2, "ok": true}},
			"requeue n=2 ok=true"},
		{"control characters", audit.Event{Type: audit.TypeRetryExhausted, TotalAttempts: 1, FinalExceptionType: "E", FinalExceptionMessage: "a\tb\x1bc"},
			"gave up after 1 attempts (exhausted): E: a b c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, eventDetail(tt.e))
		})
	}
}
