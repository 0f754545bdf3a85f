package audit_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
)

// newPublisher returns a publisher on a fresh spool dir, closed when the
// test ends if the test did not close it.
func newPublisher(t *testing.T, js jetstream.JetStream, cfg audit.PublisherConfig) *audit.Publisher {
	t.Helper()
	if cfg.SpoolDir == "" {
		cfg.SpoolDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	p, err := audit.NewPublisher(js, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}

// streamIDs reads every message of the audit stream and counts them by
// event_id, failing on a message that is not an event.
func streamIDs(t *testing.T, js jetstream.JetStream, cfg audit.StreamConfig) (map[string]int, []string) {
	t.Helper()
	events, err := audit.Query(testCtx(t, 30*time.Second), js, cfg, audit.Filter{})
	require.NoError(t, err)
	counts := make(map[string]int, len(events))
	order := make([]string, 0, len(events))
	for _, e := range events {
		counts[e.EventID]++
		order = append(order, e.EventID)
	}
	return counts, order
}

func ids(events []audit.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.EventID
	}
	return out
}

func TestPublisherDeliversAllTypes(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	var want []string
	for i := range 300 {
		ev := event([]audit.Type{audit.TypeRetryAttempt, audit.TypeRetryExhausted, audit.TypeIdempotency}[i%3], "RETRY_KV_GET", i)
		require.NoError(t, p.Emit(ctx, ev))
		want = append(want, ev.EventID)
	}
	require.NoError(t, p.Flush(ctx))
	counts, order := streamIDs(t, e.js, e.cfg)
	requireSameOrder(t, want, order) // one emitter, no failure
	require.Len(t, counts, 300)
	st := p.Stats()
	require.Equal(t, audit.PublisherStats{Accepted: 300, Published: 300}, st)
}

func TestPublisherDedupesByEventID(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	ev := event(audit.TypeRetryAttempt, "RETRY_NATS_PUBLISH", 1)
	require.NoError(t, p.Emit(ctx, ev))
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, p.Emit(ctx, ev))
	require.NoError(t, p.Flush(ctx))

	st, err := e.js.Stream(ctx, audit.DefaultStreamName)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
	require.Equal(t, uint64(2), p.Stats().Published, "both acked; the stream stored one")

	m, err := st.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, ev.EventID, m.Header.Get(jetstream.MsgIDHeader))
	require.Equal(t, "jetretry.audit.retry_attempt.RETRY_NATS_PUBLISH", m.Subject)
	require.Equal(t, string(ev.AppendJSON(nil)), string(m.Data))
	require.Empty(t, m.Header.Get("ce-specversion"), "no CloudEvents headers unless asked")
}

func TestPublisherCloudEventsHeaders(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{CloudEvents: true, Source: "/svc/orders"})
	ev := event(audit.TypeRetryExhausted, "RETRY_KV_PUT", 1)
	ev.Timestamp = time.Date(2026, 1, 25, 21, 15, 0, 500, time.UTC)
	require.NoError(t, p.Emit(ctx, ev))
	require.NoError(t, p.Flush(ctx))

	st, err := e.js.Stream(ctx, audit.DefaultStreamName)
	require.NoError(t, err)
	m, err := st.GetMsg(ctx, 1)
	require.NoError(t, err)
	want := map[string]string{
		"ce-specversion": "1.0",
		"ce-id":          ev.EventID,
		"ce-source":      "/svc/orders",
		"ce-type":        "io.jetretry.retry_exhausted",
		"ce-time":        "2026-01-25T21:15:00.0000005Z",
		"ce-subject":     "RETRY_KV_PUT",
		"Content-Type":   "application/json",
		"Nats-Msg-Id":    ev.EventID,
	}
	for k, v := range want {
		require.Equal(t, v, m.Header.Get(k), k)
	}
}

func TestPublisherEmitTruncatesAndValidates(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{MaxEventBytes: 8 << 10})

	err := p.Emit(ctx, audit.Event{Type: audit.TypeRetryAttempt})
	var verr *audit.ValidationError
	require.ErrorAs(t, err, &verr)
	require.ErrorIs(t, err, audit.ErrInvalidEvent)

	big := event(audit.TypeRetryAttempt, "RETRY_API_REQUEST", 1)
	big.AdditionalContext = map[string]any{"blob": strings.Repeat("x", 10<<10)}
	require.ErrorIs(t, p.Emit(ctx, big), audit.ErrEventTooLarge)

	long := event(audit.TypeRetryAttempt, "RETRY_API_REQUEST", 2)
	long.ExceptionMessage = strings.Repeat("m", 5000)
	require.NoError(t, p.Emit(ctx, long))
	require.NoError(t, p.Flush(ctx))
	got, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Len(t, got[0].ExceptionMessage, audit.MaxMessageBytes)
	require.Equal(t, uint64(1), p.Stats().Accepted)
}

func TestPublisherConfig(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		cfg  audit.PublisherConfig
	}{
		{"no spool dir", audit.PublisherConfig{}},
		{"negative buffer", audit.PublisherConfig{SpoolDir: "x", BufferSize: -1}},
		{"negative max pending", audit.PublisherConfig{SpoolDir: "x", MaxPending: -1}},
		{"negative ack timeout", audit.PublisherConfig{SpoolDir: "x", AckTimeout: -1}},
		{"retry wait over max", audit.PublisherConfig{SpoolDir: "x", RetryWait: time.Minute, MaxRetryWait: time.Second}},
		{"negative segment", audit.PublisherConfig{SpoolDir: "x", SegmentBytes: -1}},
		{"negative sync", audit.PublisherConfig{SpoolDir: "x", SyncInterval: -1}},
		{"negative event bytes", audit.PublisherConfig{SpoolDir: "x", MaxEventBytes: -1}},
		{"wildcard prefix", audit.PublisherConfig{SpoolDir: "x", SubjectPrefix: "a.>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := audit.NewPublisher(e.js, tt.cfg)
			require.ErrorIs(t, err, audit.ErrInvalidConfig)
		})
	}
	_, err := audit.NewPublisher(nil, audit.PublisherConfig{SpoolDir: t.TempDir()})
	require.ErrorIs(t, err, audit.ErrInvalidConfig)
}

func TestPublisherSpoolDirIsLocked(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	p := newPublisher(t, e.js, audit.PublisherConfig{SpoolDir: dir})
	_, err := audit.NewPublisher(e.js, audit.PublisherConfig{SpoolDir: dir})
	require.ErrorIs(t, err, audit.ErrSpoolInUse)
	require.NoError(t, p.Close(testCtx(t, 5*time.Second)))
	p2 := newPublisher(t, e.js, audit.PublisherConfig{SpoolDir: dir})
	require.NoError(t, p2.Close(testCtx(t, 5*time.Second)))
}

func TestPublisherClose(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	for i := range 50 {
		require.NoError(t, p.Emit(ctx, event(audit.TypeIdempotency, "RETRY_KV_PUT", i)))
	}
	require.NoError(t, p.Close(ctx), "Close flushes")
	require.Equal(t, uint64(50), p.Stats().Published)
	require.ErrorIs(t, p.Emit(ctx, event(audit.TypeIdempotency, "RETRY_KV_PUT", 99)), audit.ErrClosed)
	require.ErrorIs(t, p.Flush(ctx), audit.ErrClosed)
	require.ErrorIs(t, p.Close(ctx), audit.ErrClosed)
	counts, _ := streamIDs(t, e.js, e.cfg)
	require.Len(t, counts, 50)
}

// TestPublisherOverflowKeepsOrder fills a tiny buffer so that most events
// go through the spool, and checks they arrive once each, in emit order.
func TestPublisherOverflowKeepsOrder(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 30*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{BufferSize: 8, MaxPending: 16, SegmentBytes: 16 << 10, FullWait: -1})
	var want []string
	for i := range 3000 {
		ev := event(audit.TypeRetryAttempt, "RETRY_NATS_PUBLISH", i)
		require.NoError(t, p.Emit(ctx, ev))
		want = append(want, ev.EventID)
	}
	require.NoError(t, p.Flush(ctx))
	st := p.Stats()
	require.Positive(t, st.Spooled)
	require.Equal(t, st.Spooled, st.Replayed)
	require.Equal(t, uint64(3000), st.Published)
	require.Zero(t, st.Pending)
	_, order := streamIDs(t, e.js, e.cfg)
	requireSameOrder(t, want, order)
}

// TestPublisherBackpressureWhileLive emits a burst far larger than the
// buffer while NATS is up: Emit waits for room instead of spooling.
func TestPublisherBackpressureWhileLive(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 30*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{BufferSize: 8, MaxPending: 16, FullWait: 10 * time.Second})
	var want []string
	for i := range 2000 {
		ev := event(audit.TypeRetryAttempt, "RETRY_NATS_PUBLISH", i)
		require.NoError(t, p.Emit(ctx, ev))
		want = append(want, ev.EventID)
	}
	require.NoError(t, p.Flush(ctx))
	st := p.Stats()
	require.Zero(t, st.Spooled, "a live publisher applies backpressure rather than spooling")
	require.Equal(t, uint64(2000), st.Published)
	_, order := streamIDs(t, e.js, e.cfg)
	requireSameOrder(t, want, order)
}

// TestPublisherSpoolSurvivesRestart closes a publisher while NATS is down,
// and checks that a new one on the same spool delivers everything once.
func TestPublisherSpoolSurvivesRestart(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 30*time.Second)
	dir := t.TempDir()
	cfg := audit.PublisherConfig{SpoolDir: dir, AckTimeout: 300 * time.Millisecond, RetryWait: 20 * time.Millisecond, MaxRetryWait: 100 * time.Millisecond}
	p := newPublisher(t, e.js, cfg)
	var want []string
	emit := func(p *audit.Publisher, n int) {
		for range n {
			ev := event(audit.TypeRetryExhausted, "RETRY_KV_DELETE", len(want))
			require.NoError(t, p.Emit(ctx, ev))
			want = append(want, ev.EventID)
		}
	}
	emit(p, 100)
	require.NoError(t, p.Flush(ctx))

	e.s.Shutdown()
	// Once the client knows, nothing is published into its reconnect
	// buffer (which would be flushed on reconnect, ahead of the spool).
	require.True(t, assertEventually(func() bool { return !e.nc.IsConnected() }))
	emit(p, 200)
	closeCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	err := p.Close(closeCtx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "200 events left in the spool")
	st := p.Stats()
	require.Equal(t, int64(200), st.Pending)
	require.Equal(t, uint64(200), st.Spooled)
	segs, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, segs)

	e.s.Up()
	p2 := newPublisher(t, e.js, cfg)
	require.Equal(t, int64(200), p2.Stats().Pending, "the spool is counted at start")
	emit(p2, 50)
	require.NoError(t, p2.Flush(ctx))
	st = p2.Stats()
	// The 50 new events most likely went to the spool too, behind the
	// 200: it was not drained yet.
	require.GreaterOrEqual(t, st.Replayed, uint64(200))
	require.Equal(t, uint64(250), st.Published)
	require.Zero(t, st.Pending)
	require.NoError(t, p2.Close(ctx))

	counts, order := streamIDs(t, e.js, e.cfg)
	requireSameOrder(t, want, order)
	for id, n := range counts {
		require.Equal(t, 1, n, id)
	}
	segs, err = filepath.Glob(filepath.Join(dir, "*.jsonl*"))
	require.NoError(t, err)
	require.Empty(t, segs, "replayed segments are deleted")
}

func TestPublisherReplaysLeftoverSpoolWithTornLine(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 20*time.Second)
	dir := t.TempDir()
	a, b := event(audit.TypeRetryAttempt, "RETRY_KV_GET", 1), event(audit.TypeRetryAttempt, "RETRY_KV_GET", 2)
	data := append(a.AppendJSON(nil), '\n')
	data = append(data, b.AppendJSON(nil)...)
	data = append(data, '\n')
	data = append(data, `{"event_type":"retry_att`...) // torn by a crash
	seg := filepath.Join(dir, "00000000004294967296.jsonl")
	require.NoError(t, os.WriteFile(seg, data, 0o600))

	p := newPublisher(t, e.js, audit.PublisherConfig{SpoolDir: dir})
	require.NoError(t, p.Flush(ctx))
	st := p.Stats()
	require.Equal(t, uint64(2), st.Replayed)
	require.Equal(t, uint64(1), st.Unreadable)
	require.Zero(t, st.Pending)
	_, order := streamIDs(t, e.js, e.cfg)
	require.Equal(t, []string{a.EventID, b.EventID}, order)
	_, err := os.Stat(seg + ".bad")
	require.NoError(t, err, "a segment with unreadable lines is kept")
}

func TestPublisherFlushTimesOutWhileDown(t *testing.T) {
	e := newEnv(t)
	p := newPublisher(t, e.js, audit.PublisherConfig{AckTimeout: 200 * time.Millisecond})
	e.s.Shutdown()
	require.NoError(t, p.Emit(t.Context(), event(audit.TypeIdempotency, "RETRY_KV_GET", 1)))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := p.Flush(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, int64(1), p.Stats().Pending)
	e.s.Up()
	require.NoError(t, p.Flush(testCtx(t, 20*time.Second)))
	require.Equal(t, uint64(1), p.Stats().Published)
}

func TestPublisherConcurrentEmitAndNoLeak(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 30*time.Second)
	before := runtime.NumGoroutine()
	p, err := audit.NewPublisher(e.js, audit.PublisherConfig{SpoolDir: t.TempDir(), BufferSize: 64, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]bool{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 250 {
				ev := event(audit.TypeRetryAttempt, fmt.Sprintf("RETRY_CAT_%d", g), i)
				if err := p.Emit(ctx, ev); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[ev.EventID] = true
				mu.Unlock()
				if i%50 == 0 {
					_ = p.Flush(ctx)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, p.Close(ctx))
	// The run loop and the private JetStream context's goroutines are gone.
	if !assertEventually(func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: before %d, now %d\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	}
	counts, _ := streamIDs(t, e.js, e.cfg)
	require.Len(t, counts, len(want))
	for id := range want {
		require.Equal(t, 1, counts[id])
	}
}

func assertEventually(cond func() bool) bool {
	for range 250 {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// requireSameOrder compares event id lists, reporting the first
// difference rather than both lists.
func requireSameOrder(t *testing.T, want, got []string) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Fatalf("order differs at %d of %d/%d: want %s, got %s", i, len(want), len(got), want[i], got[i])
		}
	}
	require.Len(t, got, len(want))
}
