package test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
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
	Jobs demoJobsOutput `json:"jobs"`
}

// demoJobsOutput is the jobs part of the demo's output.
type demoJobsOutput struct {
	Queue            string `json:"queue"`
	KeyPrefix        string `json:"key_prefix"`
	Planned          int    `json:"planned"`
	Submitted        int    `json:"submitted"`
	CrashSimulated   bool   `json:"crash_simulated"`
	Success          int    `json:"success"`
	FailedFinal      int    `json:"failed_final"`
	FailedExhausted  int    `json:"failed_exhausted"`
	Unfinished       int    `json:"unfinished"`
	Attempts         int    `json:"attempts"`
	Retries          int    `json:"retries"`
	RateLimitedWaits int    `json:"rate_limited_waits"`
	CrashedRuns      int    `json:"crashed_runs"`
	DeadLetters      int    `json:"dead_letters"`
	Audit            struct {
		Events        int `json:"events"`
		RetryAttempts int `json:"retry_attempts"`
		RateLimited   int `json:"rate_limited"`
		Crashed       int `json:"crashed"`
		Exhausted     int `json:"retry_exhausted"`
		Final         int `json:"final"`
		MaxAttempts   int `json:"max_attempts"`
	} `json:"audit"`
}

// jobRecord holds the job record fields the test checks, decoded with
// encoding/json from the jobs bucket.
type jobRecord struct {
	Key            string `json:"key"`
	Queue          string `json:"queue"`
	Payload        []byte `json:"payload"`
	Status         string `json:"status"`
	AttemptCount   int    `json:"attempt_count"`
	BudgetUsed     int    `json:"budget_used"`
	CurrentRunID   string `json:"current_run_id"`
	Terminal       bool   `json:"terminal"`
	TerminalReason string `json:"terminal_reason"`
	History        []struct {
		RunID      string `json:"run_id"`
		Owner      string `json:"owner"`
		Outcome    string `json:"outcome"`
		ErrorClass string `json:"error_class"`
	} `json:"history"`
}

// plan decodes the demo's plan from the job's payload.
func (r jobRecord) plan(t *testing.T) (kind string, failures int) {
	t.Helper()
	var p struct {
		Plan     string `json:"plan"`
		Failures int    `json:"failures"`
	}
	require.NoError(t, json.Unmarshal(r.Payload, &p), string(r.Payload))
	return p.Plan, p.Failures
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
	Operation     string `json:"operation"`
	CorrelationID string `json:"correlation_id"`
	Context       struct {
		ErrorClass string `json:"error_class"`
	} `json:"additional_context"`
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
	var events, jobEvents []rawEvent
	ids := map[string]bool{}
	for uint64(len(events)+len(jobEvents)) < total {
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
			if e.Operation == "jobs.demo-reports" {
				// The jobs' events carry no tenant; their correlation id
				// is the job key, the run's.
				require.Empty(t, e.TenantID)
				require.Equal(t, "REPLAY_REPLAY_PROCESSING", e.Category)
				require.True(t, strings.HasPrefix(e.CorrelationID, printed.Jobs.KeyPrefix), e.CorrelationID)
				jobEvents = append(jobEvents, e)
				continue
			}
			require.Equal(t, printed.TenantID, e.TenantID, "a fresh server holds only the run's events")
			events = append(events, e)
		}
		require.NoError(t, batch.Error())
		require.Positive(t, n, "the stream stalled at %d of %d messages", len(events)+len(jobEvents), total)
	}
	require.Len(t, events, printed.Events)
	require.Len(t, jobEvents, printed.Jobs.Audit.Events)

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

	checkDemoJobs(t, ctx, js, printed.Jobs, jobEvents)
}

// checkDemoJobs checks the demo's jobs against the job records in the
// bucket, the dead letters and the jobs' audit events, all read with plain
// nats.go.
func checkDemoJobs(t *testing.T, ctx context.Context, js jetstream.JetStream, printed demoJobsOutput, events []rawEvent) {
	require.Equal(t, "demo-reports", printed.Queue)
	require.Equal(t, 30, printed.Planned, "one job per 10 of the 300 operations")
	require.Equal(t, printed.Planned, printed.Submitted)
	require.True(t, printed.CrashSimulated)

	// The job records of the run.
	kv, err := js.KeyValue(ctx, "JETRETRY_JOBS")
	require.NoError(t, err)
	ids, err := kv.ListKeys(ctx)
	require.NoError(t, err)
	recs := map[string]jobRecord{}
	for id := range ids.Keys() {
		e, err := kv.Get(ctx, id)
		require.NoError(t, err)
		var r jobRecord
		require.NoError(t, json.Unmarshal(e.Value(), &r), string(e.Value()))
		require.True(t, strings.HasPrefix(r.Key, printed.KeyPrefix), "a fresh server holds only the run's jobs: %s", r.Key)
		require.Equal(t, "demo-reports", r.Queue)
		recs[r.Key] = r
	}
	require.Len(t, recs, printed.Submitted)

	// Each job's record follows its plan; its audit events match it.
	byKey := map[string][]rawEvent{}
	for _, e := range events {
		byKey[e.CorrelationID] = append(byKey[e.CorrelationID], e)
	}
	kinds := map[string]int{}
	failed := map[string]jobRecord{}
	var want demoJobsOutput
	for key, r := range recs {
		kind, failures := r.plan(t)
		kinds[kind]++
		var attempts, exhausted []rawEvent
		for _, e := range byKey[key] {
			switch e.Type {
			case "retry_attempt":
				attempts = append(attempts, e)
			case "retry_exhausted":
				exhausted = append(exhausted, e)
			}
		}
		require.Len(t, attempts, r.AttemptCount-1, "%s: a retry_attempt event before each run after the first", key)
		require.Len(t, r.History, r.AttemptCount, key)
		switch kind {
		case "ok", "transient", "rate_limited", "crash":
			require.Equal(t, "success", r.Status, key)
			require.False(t, r.Terminal, key)
			require.Empty(t, exhausted, key)
			last := r.History[len(r.History)-1]
			require.Equal(t, "success", last.Outcome, key)
			require.Equal(t, last.RunID, r.CurrentRunID, key)
		default:
			require.Equal(t, "failed", r.Status, key)
			require.True(t, r.Terminal, key)
			require.Len(t, exhausted, 1, key)
			require.Equal(t, r.TerminalReason, exhausted[0].StopReason, key)
			require.Equal(t, r.AttemptCount, exhausted[0].TotalAttempts, key)
			failed[key] = r
		}
		switch kind {
		case "ok":
			require.Equal(t, 1, r.AttemptCount, key)
		case "transient":
			require.Equal(t, failures+1, r.AttemptCount, key)
			require.Equal(t, failures, r.BudgetUsed, key)
		case "rate_limited":
			require.Equal(t, failures+1, r.AttemptCount, key)
			require.Zero(t, r.BudgetUsed, "%s: rate limits keep the budget", key)
			for _, e := range attempts {
				require.Equal(t, "rate_limited", e.Context.ErrorClass, key)
			}
		case "final":
			require.Equal(t, "final", r.TerminalReason, key)
			require.Equal(t, 1, r.AttemptCount, key)
		case "exhaust":
			require.Equal(t, "max_attempts", r.TerminalReason, key)
			require.Equal(t, 4, r.AttemptCount, key)
			require.Equal(t, 4, r.BudgetUsed, key)
		case "crash":
			require.Equal(t, 2, r.AttemptCount, key)
			require.Equal(t, "crashed", r.History[0].Outcome, key)
			require.Equal(t, "crashed", r.History[0].ErrorClass, key)
			require.True(t, strings.HasSuffix(r.History[0].Owner, "/worker-crashing"), r.History[0].Owner)
			require.NotEqual(t, r.History[0].Owner, r.History[1].Owner, key)
			require.NotEqual(t, r.History[0].RunID, r.History[1].RunID, key)
			require.Len(t, attempts, 1, key)
			require.Equal(t, "crashed", attempts[0].Context.ErrorClass, key)
		default:
			t.Fatalf("%s: unknown plan %q", key, kind)
		}
		switch r.Status {
		case "success":
			want.Success++
		case "failed":
			if r.TerminalReason == "final" {
				want.FailedFinal++
			} else {
				want.FailedExhausted++
			}
		}
		want.Attempts += r.AttemptCount
		want.Retries += r.AttemptCount - 1
		for _, h := range r.History {
			switch {
			case h.Outcome == "crashed":
				want.CrashedRuns++
			case h.ErrorClass == "rate_limited":
				want.RateLimitedWaits++
			}
		}
	}
	for _, k := range []string{"ok", "transient", "rate_limited", "final", "exhaust"} {
		require.Positive(t, kinds[k], "jobs planned %s: %v", k, kinds)
	}
	require.Equal(t, 1, kinds["crash"])

	// The dead letters hold the failed jobs, each once, with its history.
	dlq, err := js.Stream(ctx, "JETRETRY_JOBS_DLQ")
	require.NoError(t, err)
	cons, err := dlq.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"jetretry.dlq.demo-reports"}})
	require.NoError(t, err)
	info, err := dlq.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(failed)), info.State.Msgs)
	batch, err := cons.Fetch(len(failed)+1, jetstream.FetchMaxWait(time.Second))
	require.NoError(t, err)
	dead := map[string]bool{}
	for m := range batch.Messages() {
		var r jobRecord
		require.NoError(t, json.Unmarshal(m.Data(), &r), string(m.Data()))
		f, ok := failed[r.Key]
		require.True(t, ok, "dead letter %s of a job that did not fail", r.Key)
		require.False(t, dead[r.Key], "%s dead-lettered twice", r.Key)
		dead[r.Key] = true
		require.Equal(t, "failed", r.Status)
		require.Equal(t, f.TerminalReason, r.TerminalReason)
		require.Len(t, r.History, f.AttemptCount)
	}
	require.Len(t, dead, len(failed))

	// The printed summary equals what was read back.
	require.Zero(t, printed.Unfinished)
	require.Equal(t, want.Success, printed.Success)
	require.Equal(t, want.FailedFinal, printed.FailedFinal)
	require.Equal(t, want.FailedExhausted, printed.FailedExhausted)
	require.Equal(t, want.Attempts, printed.Attempts)
	require.Equal(t, want.Retries, printed.Retries)
	require.Equal(t, want.RateLimitedWaits, printed.RateLimitedWaits)
	require.Equal(t, 1, printed.CrashedRuns)
	require.Equal(t, want.CrashedRuns, printed.CrashedRuns)
	require.Equal(t, len(failed), printed.DeadLetters)
	require.Equal(t, want.Retries, printed.Audit.RetryAttempts)
	require.Equal(t, len(failed), printed.Audit.Exhausted)
	require.Equal(t, printed.FailedFinal, printed.Audit.Final)
	require.Equal(t, printed.FailedExhausted, printed.Audit.MaxAttempts)
	require.Equal(t, printed.RateLimitedWaits, printed.Audit.RateLimited)
	require.Equal(t, 1, printed.Audit.Crashed)
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
