package audit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
)

// seedEvents publishes 3 types x 3 categories x 20 events through a
// Publisher and returns them in emit order.
func seedEvents(t *testing.T, e *env) []audit.Event {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	types := []audit.Type{audit.TypeRetryAttempt, audit.TypeRetryExhausted, audit.TypeIdempotency}
	cats := []string{"RETRY_KV_GET", "RETRY_NATS_PUBLISH", "REPLAY_REPLAY_PROCESSING"}
	var all []audit.Event
	for i := range 180 {
		ev := event(types[i%3], cats[(i/3)%3], i)
		require.NoError(t, p.Emit(ctx, ev))
		all = append(all, ev)
	}
	require.NoError(t, p.Flush(ctx))
	return all
}

func TestQueryFilters(t *testing.T) {
	e := newEnv(t)
	all := seedEvents(t, e)
	tests := []struct {
		name string
		f    audit.Filter
		want int
	}{
		{"all", audit.Filter{}, 180},
		{"one type", audit.Filter{Types: []audit.Type{audit.TypeRetryExhausted}}, 60},
		{"two types", audit.Filter{Types: []audit.Type{audit.TypeRetryAttempt, audit.TypeIdempotency}}, 120},
		{"one category", audit.Filter{Categories: []string{"RETRY_NATS_PUBLISH"}}, 60},
		{"type and category", audit.Filter{Types: []audit.Type{audit.TypeIdempotency}, Categories: []string{"RETRY_KV_GET", "REPLAY_REPLAY_PROCESSING"}}, 40},
		{"tenant", audit.Filter{TenantID: "tenant-1"}, 60},
		{"correlation", audit.Filter{CorrelationID: "corr-42"}, 1},
		{"since", audit.Filter{Since: base.Add(100 * time.Second)}, 80},
		{"until", audit.Filter{Until: base.Add(10 * time.Second)}, 10},
		{"range", audit.Filter{Since: base.Add(30 * time.Second), Until: base.Add(60 * time.Second)}, 30},
		{"tenant in range of a type", audit.Filter{Types: []audit.Type{audit.TypeRetryAttempt}, TenantID: "tenant-0", Since: base.Add(90 * time.Second)}, 30},
		{"unknown category", audit.Filter{Categories: []string{"RETRY_NOPE"}}, 0},
		{"category that sanitizes like another", audit.Filter{Categories: []string{"RETRY.KV.GET"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := audit.Query(testCtx(t, 20*time.Second), e.js, e.cfg, tt.f)
			require.NoError(t, err)
			var want []audit.Event
			for _, ev := range all {
				if tt.f.Match(ev) {
					want = append(want, ev)
				}
			}
			require.Len(t, want, tt.want, "test table")
			require.Equal(t, ids(want), ids(got))
			for i := range got {
				require.Equal(t, string(want[i].AppendJSON(nil)), string(got[i].AppendJSON(nil)))
			}
		})
	}
}

func TestQueryEmptyAndMissingStream(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	got, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{})
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = audit.Query(ctx, e.js, audit.StreamConfig{Name: "NOPE"}, audit.Filter{})
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)

	_, err = audit.Query(ctx, e.js, audit.StreamConfig{Name: "A.B"}, audit.Filter{})
	require.ErrorIs(t, err, audit.ErrInvalidConfig)
}

func TestQueryStopsWhileEventsArrive(t *testing.T) {
	e := newEnv(t)
	seedEvents(t, e)
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = p.Emit(ctx, event(audit.TypeRetryAttempt, "RETRY_API_REQUEST", i))
			time.Sleep(time.Millisecond)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	// A filter that matches nothing recent must not wait for a match.
	got, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{Categories: []string{"RETRY_KV_GET"}})
	require.NoError(t, err)
	require.Len(t, got, 60)
	got, err = audit.Query(ctx, e.js, e.cfg, audit.Filter{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(got), 180)
}

func TestQuerySkipsUndecodableMessages(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	good := event(audit.TypeRetryAttempt, "RETRY_KV_GET", 1)
	_, err := e.js.Publish(ctx, "jetretry.audit.retry_attempt.RETRY_KV_GET", []byte("not json"))
	require.NoError(t, err)
	_, err = e.js.Publish(ctx, "jetretry.audit.x.y", []byte(`{"event_type":"retry_attempt"}`))
	require.NoError(t, err)
	_, err = e.js.Publish(ctx, audit.Subject(audit.DefaultSubjectPrefix, good), good.AppendJSON(nil))
	require.NoError(t, err)

	got, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{})
	require.ErrorIs(t, err, audit.ErrUndecodable)
	var derr *audit.DecodeError
	require.ErrorAs(t, err, &derr)
	require.Equal(t, 2, derr.Count)
	require.Equal(t, uint64(1), derr.FirstSeq)
	require.Equal(t, []string{good.EventID}, ids(got))

	stats, err := audit.Stats(ctx, e.js, e.cfg, audit.Filter{})
	require.ErrorIs(t, err, audit.ErrUndecodable)
	require.Equal(t, 1, stats["RETRY_KV_GET"].Attempts)
}

func TestTailFollowsLiveEvents(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	before := event(audit.TypeRetryExhausted, "RETRY_KV_PUT", 0)
	require.NoError(t, p.Emit(ctx, before))
	require.NoError(t, p.Flush(ctx))

	f := audit.Filter{Types: []audit.Type{audit.TypeRetryExhausted}, TenantID: "tenant-1"}
	got := make(chan audit.Event, 100)
	tailCtx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		errc <- audit.Tail(tailCtx, e.js, e.cfg, f, func(ev audit.Event) error {
			got <- ev
			return nil
		})
	}()

	// Tail starts at new events: emit until the first arrives, so the
	// test does not depend on when the consumer is ready.
	var first audit.Event
	for i := 1; first.EventID == ""; i += 3 {
		require.NoError(t, p.Emit(ctx, event(audit.TypeRetryExhausted, "RETRY_KV_PUT", i))) // tenant-1
		select {
		case first = <-got:
		case <-time.After(50 * time.Millisecond):
		}
	}
	require.NotEqual(t, before.EventID, first.EventID)
	// Non-matching events are not delivered; matching ones are, in order.
	var want []string
	for i := 1000; i < 1030; i++ {
		ev := event([]audit.Type{audit.TypeRetryExhausted, audit.TypeRetryAttempt}[i%2], "RETRY_KV_PUT", i)
		require.NoError(t, p.Emit(ctx, ev))
		if f.Match(ev) {
			want = append(want, ev.EventID)
		}
	}
	require.NoError(t, p.Flush(ctx))
	require.NotEmpty(t, want)
	var seen []string
	for len(seen) < len(want) {
		select {
		case ev := <-got:
			if ev.Operation == fmt.Sprintf("op %d", 0) {
				t.Fatal("an event from before Tail started was delivered")
			}
			if ev.CorrelationID >= "corr-1000" {
				seen = append(seen, ev.EventID)
			}
		case <-ctx.Done():
			t.Fatalf("got %d of %d events", len(seen), len(want))
		}
	}
	require.Equal(t, want, seen)
	cancel()
	require.ErrorIs(t, <-errc, context.Canceled)
}

func TestTailSinceAndCallbackError(t *testing.T) {
	e := newEnv(t)
	all := seedEvents(t, e)
	ctx := testCtx(t, 20*time.Second)
	stop := errors.New("enough")
	var seen []audit.Event
	err := audit.Tail(ctx, e.js, e.cfg, audit.Filter{Since: base, Categories: []string{"RETRY_KV_GET"}}, func(ev audit.Event) error {
		seen = append(seen, ev)
		if len(seen) == 10 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	var want []string
	for _, ev := range all {
		if ev.Category == "RETRY_KV_GET" && len(want) < 10 {
			want = append(want, ev.EventID)
		}
	}
	require.Equal(t, want, ids(seen))
}

func TestQueryHostileCategories(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 20*time.Second)
	p := newPublisher(t, e.js, audit.PublisherConfig{})
	cats := []string{"a.b", "a_b", "*", ">", "a b", "tab\tcat", "ünï", "🔥", "x.>", "RETRY_KV_GET"}
	byCat := map[string]string{}
	for i, c := range cats {
		ev := event(audit.TypeRetryAttempt, c, i)
		ev.Type = audit.Type("type." + c) // hostile types too
		require.NoError(t, p.Emit(ctx, ev))
		byCat[c] = ev.EventID
	}
	require.NoError(t, p.Flush(ctx))
	for _, c := range cats {
		got, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{Categories: []string{c}, Types: []audit.Type{audit.Type("type." + c)}})
		require.NoError(t, err)
		require.Equal(t, []string{byCat[c]}, ids(got), "category %q", c)
	}
	all, err := audit.Query(ctx, e.js, e.cfg, audit.Filter{})
	require.NoError(t, err)
	require.Len(t, all, len(cats))
}
