package audit

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemory(t *testing.T) {
	ctx := context.Background()
	var m Memory // the zero value is usable
	require.Zero(t, m.Len())
	require.Nil(t, m.Events())
	require.Nil(t, m.Filter(nil))

	g := goldenEvents()
	for _, name := range goldenNames {
		require.NoError(t, m.Emit(ctx, g[name]))
	}
	require.Equal(t, 3, m.Len())
	require.Equal(t, []Event{g["retry_attempt"], g["retry_exhausted"], g["idempotency"]}, m.Events())

	tests := []struct {
		name string
		keep func(Event) bool
		want []Event
	}{
		{name: "nil keeps all", keep: nil, want: m.Events()},
		{name: "by type", keep: func(e Event) bool { return e.Type == TypeIdempotency }, want: []Event{g["idempotency"]}},
		{name: "none", keep: func(Event) bool { return false }, want: nil},
		{name: "keep may call the Memory", keep: func(Event) bool { return m.Len() == 3 }, want: m.Events()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, m.Filter(tt.keep))
		})
	}

	m.Reset()
	require.Zero(t, m.Len())
	require.Nil(t, m.Events())
}

func TestMemoryIsolation(t *testing.T) {
	ctx := context.Background()
	var m Memory
	extra := map[string]any{"k": "v"}
	e := Event{Type: "x", AdditionalContext: extra}
	require.NoError(t, m.Emit(ctx, e))

	extra["k"] = "changed"
	got := m.Events()
	require.Equal(t, "v", got[0].AdditionalContext["k"], "Emit keeps its own map")

	got[0].Type = "changed"
	require.Equal(t, Type("x"), m.Events()[0].Type, "Events returns a copy")
}

func TestMemoryConcurrent(t *testing.T) {
	ctx := context.Background()
	var m Memory
	const workers, perWorker = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				require.NoError(t, m.Emit(ctx, Event{Type: "x", EventID: fmt.Sprint(w, "-", i)}))
				_ = m.Len()
				_ = m.Filter(func(e Event) bool { return e.EventID == "0-0" })
				if i%50 == 0 {
					_ = m.Events()
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, workers*perWorker, m.Len())
	seen := make(map[string]bool)
	for _, e := range m.Events() {
		seen[e.EventID] = true
	}
	require.Len(t, seen, workers*perWorker)
}
