package test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/internal/cli"
	"github.com/jetretry/jetretry/internal/natstest"
)

// demoOutput is what `jetretry demo --json` prints, decoded here without
// the CLI's types.
type demoOutput struct {
	RunID        string `json:"run_id"`
	TenantID     string `json:"tenant_id"`
	Server       string `json:"server"`
	Embedded     bool   `json:"embedded"`
	Operations   int64  `json:"operations"`
	Failed       int64  `json:"failed_operations"`
	Stream       string `json:"stream"`
	Events       int    `json:"events"`
	StreamEvents uint64 `json:"stream_events"`
	Categories   []struct {
		demoStats
		Category string `json:"category"`
	} `json:"categories"`
}

// demoStats are the statistics of one category, by the definitions of
// audit.CategoryStats.
type demoStats struct {
	Attempts           int     `json:"attempts"`
	Exhaustions        int     `json:"exhaustions"`
	IdempotencyHits    int     `json:"idempotency_hits"`
	IdempotencyRecords int     `json:"idempotency_records"`
	Takeovers          int     `json:"takeovers"`
	CallsWithFailures  int     `json:"calls_with_failures"`
	FailedCalls        int     `json:"failed_calls"`
	SuccessRate        float64 `json:"success_rate"`
	AvgAttempts        float64 `json:"avg_attempts"`
}

// rawEvent holds the audit event fields the statistics use, decoded with
// encoding/json from the stream's messages.
type rawEvent struct {
	Type          string `json:"event_type"`
	Category      string `json:"retry_category"`
	AttemptNumber int    `json:"attempt_number"`
	TotalAttempts int    `json:"total_attempts"`
	StopReason    string `json:"stop_reason"`
	Action        string `json:"action"`
	TenantID      string `json:"tenant_id"`
	SpanID        string `json:"span_id"`
	EventID       string `json:"event_id"`
}

// TestDemoEndToEnd runs the demo against a server, reads the audit stream
// back with a plain nats.go client, and recomputes the statistics the demo
// printed from the raw events.
func TestDemoEndToEnd(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"demo", "--server", s.URL(), "--duration", "2s", "--rate", "150", "--seed", "5", "--json"}, &out, &errOut)
	require.Equal(t, cli.ExitOK, code, errOut.String())
	var printed demoOutput
	require.NoError(t, json.Unmarshal(out.Bytes(), &printed), out.String())
	require.False(t, printed.Embedded)
	require.Equal(t, s.URL(), printed.Server)
	require.Equal(t, "JETRETRY_AUDIT", printed.Stream)
	require.Equal(t, int64(300), printed.Operations)

	// Every message of the stream, with a plain ordered consumer.
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	stream, err := js.Stream(ctx, "JETRETRY_AUDIT")
	require.NoError(t, err)
	info, err := stream.Info(ctx)
	require.NoError(t, err)
	total := info.State.Msgs
	require.Equal(t, printed.StreamEvents, total)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	var events []rawEvent
	ids := map[string]bool{}
	for uint64(len(events)) < total {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			var e rawEvent
			require.NoError(t, json.Unmarshal(m.Data(), &e), string(m.Data()))
			require.Equal(t, "jetretry.audit."+e.Type+"."+e.Category, m.Subject())
			require.Equal(t, e.EventID, m.Headers().Get(jetstream.MsgIDHeader))
			require.False(t, ids[e.EventID], "event %s stored twice", e.EventID)
			ids[e.EventID] = true
			require.Equal(t, printed.TenantID, e.TenantID, "a fresh server holds only the run's events")
			events = append(events, e)
		}
		require.NoError(t, batch.Error())
		require.Positive(t, n, "the stream stalled at %d of %d messages", len(events), total)
	}
	require.Len(t, events, printed.Events)

	types := map[string]int{}
	cats := map[string]int{}
	for _, e := range events {
		types[e.Type]++
		cats[e.Category]++
	}
	for _, typ := range []string{"retry_attempt", "retry_exhausted", "idempotency"} {
		require.Positive(t, types[typ], "events of type %s", typ)
	}
	require.Len(t, types, 3)
	require.Len(t, cats, 17, "every category appears: %v", cats)
	for _, c := range categories.All() {
		require.Positive(t, cats[string(c)], "events of %s", c)
	}

	// The printed statistics equal the ones recomputed from the events.
	want := recomputeStats(events)
	require.Len(t, printed.Categories, 17)
	exhaustions := 0
	for i, c := range categories.All() {
		got := printed.Categories[i]
		require.Equal(t, string(c), got.Category)
		w := want[string(c)]
		require.InDelta(t, w.SuccessRate, got.SuccessRate, 1e-9, "%s success rate", c)
		require.InDelta(t, w.AvgAttempts, got.AvgAttempts, 1e-9, "%s average attempts", c)
		w.SuccessRate, w.AvgAttempts = got.SuccessRate, got.AvgAttempts
		require.Equal(t, w, got.demoStats, "%s", c)
		exhaustions += got.Exhaustions
	}
	// Every failed operation ended in exactly one failed call.
	require.Equal(t, printed.Failed, int64(exhaustions))
}

// recomputeStats computes per-category statistics from events, following
// the definitions documented on audit.CategoryStats: attempts count
// retry_attempt events, exhaustions retry_exhausted events; calls with
// failures are the retried calls (attempt_number 1) plus the calls that
// failed at their only attempt (total_attempts 1, and no retry_attempt with
// the same span_id); success rate and average attempts describe those
// calls, a call stopped while waiting making no final attempt.
func recomputeStats(events []rawEvent) map[string]demoStats {
	type acc struct {
		demoStats
		attemptSpans  map[string]bool
		exhaustedSpan []rawEvent
	}
	accs := map[string]*acc{}
	for _, e := range events {
		a := accs[e.Category]
		if a == nil {
			a = &acc{attemptSpans: map[string]bool{}}
			accs[e.Category] = a
		}
		switch e.Type {
		case "retry_attempt":
			a.Attempts++
			if e.AttemptNumber == 1 {
				a.CallsWithFailures++
			}
			a.attemptSpans[e.SpanID] = true
		case "retry_exhausted":
			a.Exhaustions++
			a.exhaustedSpan = append(a.exhaustedSpan, e)
		case "idempotency":
			switch e.Action {
			case "hit":
				a.IdempotencyHits++
			case "record":
				a.IdempotencyRecords++
			case "takeover":
				a.Takeovers++
			}
		}
	}
	out := map[string]demoStats{}
	for c, a := range accs {
		interrupted := 0
		for _, e := range a.exhaustedSpan {
			switch {
			case a.attemptSpans[e.SpanID]:
				interrupted++
			case e.TotalAttempts == 1:
				a.CallsWithFailures++
			}
		}
		a.FailedCalls = a.Exhaustions
		if n := a.CallsWithFailures; n > 0 {
			a.SuccessRate = max(0, float64(n-a.FailedCalls)/float64(n))
			a.AvgAttempts = float64(a.Attempts+n-interrupted) / float64(n)
		}
		out[c] = a.demoStats
	}
	return out
}
