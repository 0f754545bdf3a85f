package test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
)

// TestAuditAcrossOutage emits audit events from several goroutines while
// the NATS server goes down and comes back on the same port and store.
// Every event must end up in the stream exactly once.
func TestAuditAcrossOutage(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()

	s := natstest.Start(t)
	nc, js := s.JetStream(t, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	_, err := audit.EnsureStream(ctx, js, audit.StreamConfig{})
	require.NoError(t, err)
	const maxPending = 64
	p, err := audit.NewPublisher(js, audit.PublisherConfig{
		SpoolDir:     t.TempDir(),
		BufferSize:   256,
		MaxPending:   maxPending,
		AckTimeout:   time.Second,
		RetryWait:    20 * time.Millisecond,
		MaxRetryWait: 200 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	require.NoError(t, err)

	const emitters, perEmitter = 5, 1000
	const total = emitters * perEmitter
	var emitted atomic.Int64
	ids := make([][]string, emitters)
	var wg sync.WaitGroup
	for g := range emitters {
		wg.Go(func() {
			for i := range perEmitter {
				e := audit.Event{
					Type:          audit.TypeRetryAttempt,
					Category:      "RETRY_NATS_CONNECT",
					Operation:     fmt.Sprintf("emitter %d", g),
					AttemptNumber: i%5 + 1,
					MaxAttempts:   5,
					ExceptionType: "ConnectionError",
					TenantID:      fmt.Sprintf("tenant-%d", g),
					Timestamp:     time.Now().UTC(),
					EventID:       audit.NewEventID(),
					SchemaVersion: audit.SchemaVersion,
				}
				if err := p.Emit(ctx, e); err != nil {
					t.Errorf("emit: %v", err)
					return
				}
				ids[g] = append(ids[g], e.EventID)
				emitted.Add(1)
				if i%2 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}

	waitFor := func(n int64) {
		for emitted.Load() < n && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(total / 3)
	s.Shutdown()
	atDown := emitted.Load()
	// Let at least 1000 events be emitted while the server is down.
	waitFor(atDown + 1000)
	atUp := emitted.Load()
	s.Up()
	wg.Wait()
	require.Greater(t, atUp, atDown, "events were emitted during the outage")

	require.NoError(t, p.Flush(ctx))
	st := p.Stats()
	require.NoError(t, p.Close(ctx))
	t.Logf("emitted %d (down at %d, up at %d); stats %+v; %v", total, atDown, atUp, st, time.Since(start))
	require.Equal(t, uint64(total), st.Accepted)
	require.Positive(t, st.Spooled)
	require.Positive(t, st.Replayed)
	require.GreaterOrEqual(t, st.Published, uint64(total))
	require.Zero(t, st.Pending)

	counts, order := readEventIDs(ctx, t, js)
	for g := range emitters {
		for _, id := range ids[g] {
			require.Equal(t, 1, counts[id], "event %s", id)
		}
	}
	require.Len(t, counts, total)
	require.True(t, nc.IsConnected())

	// Order: each emitter's events are stored in emit order, except that
	// an event whose publish failed can land after events that were in
	// flight with it: at most maxPending of them.
	pos := make(map[string]int, total)
	for i, id := range order {
		pos[id] = i
	}
	worst := 0
	for g := range emitters {
		for i, id := range ids[g] {
			later := 0 // events emitted after this one but stored before it
			for _, next := range ids[g][i+1:] {
				if pos[next] < pos[id] {
					later++
				}
			}
			worst = max(worst, later)
		}
	}
	t.Logf("worst reordering: %d events", worst)
	require.LessOrEqual(t, worst, maxPending)
	require.Less(t, time.Since(start), 60*time.Second)
}

// readEventIDs reads every message of the audit stream with an ordered
// consumer, and returns their count by event_id and the event_ids in
// stream order.
func readEventIDs(ctx context.Context, t *testing.T, js jetstream.JetStream) (map[string]int, []string) {
	t.Helper()
	st, err := js.Stream(ctx, audit.DefaultStreamName)
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	counts := make(map[string]int)
	var order []string
	for n := uint64(0); n < info.State.Msgs; {
		batch, err := cons.Fetch(int(min(500, info.State.Msgs-n)), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			var e struct {
				EventID string `json:"event_id"`
			}
			require.NoError(t, json.Unmarshal(m.Data(), &e))
			require.Equal(t, e.EventID, m.Headers().Get(jetstream.MsgIDHeader))
			counts[e.EventID]++
			order = append(order, e.EventID)
			n++
		}
		require.NoError(t, batch.Error())
	}
	require.Equal(t, info.State.Msgs, uint64(len(counts)), "messages in the stream")
	return counts, order
}

// TestAuditSpoolReplayIsDedupedAcrossRestart replays a spool whose events
// the stream already stored (a publisher that crashed after the acks but
// before deleting its segment), after a server restart: the stream's
// dedupe window, rebuilt from its store, keeps one copy of each.
func TestAuditSpoolReplayIsDedupedAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := natstest.Start(t)
	_, js := s.JetStream(t, nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1))
	_, err := audit.EnsureStream(ctx, js, audit.StreamConfig{})
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(t.Output(), nil))

	var lines []byte
	p, err := audit.NewPublisher(js, audit.PublisherConfig{SpoolDir: t.TempDir(), Logger: logger})
	require.NoError(t, err)
	for i := range 100 {
		e := audit.Event{
			Type: audit.TypeIdempotency, Category: "RETRY_KV_PUT", Action: audit.ActionRecord,
			IdempotencyKey: fmt.Sprint(i), Timestamp: time.Now().UTC(), EventID: audit.NewEventID(),
		}
		require.NoError(t, p.Emit(ctx, e))
		lines = append(e.AppendJSON(lines), '\n')
	}
	require.NoError(t, p.Close(ctx))

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000000004294967296.jsonl"), lines, 0o600))
	s.Restart()

	p2, err := audit.NewPublisher(js, audit.PublisherConfig{SpoolDir: dir, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, p2.Flush(ctx))
	require.Equal(t, uint64(100), p2.Stats().Replayed)
	require.NoError(t, p2.Close(ctx))

	counts, _ := readEventIDs(ctx, t, js)
	require.Len(t, counts, 100)
	for id, n := range counts {
		require.Equal(t, 1, n, id)
	}
}
