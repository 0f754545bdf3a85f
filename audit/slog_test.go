package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// newJSONLogger returns a logger writing JSON lines without the record time
// to buf.
func newJSONLogger(buf *bytes.Buffer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestSlog(t *testing.T) {
	g := goldenEvents()
	withContext := g["retry_exhausted"]
	withContext.StopReason = "deadline"
	withContext.AdditionalContext = map[string]any{"z": 1, "a": "x"}
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{
			name: "retry_attempt",
			e:    g["retry_attempt"],
			want: `{"level":"INFO","msg":"audit event","event_type":"retry_attempt","retry_category":"RETRY_NATS_PUBLISH","operation":"Publish to exoarmur.audit.append.v1","attempt_number":2,"max_attempts":3,"delay_seconds":1.05,"exception_type":"TimeoutError","exception_message":"Connection timeout","tenant_id":"tenant-123","correlation_id":"corr-456","trace_id":"trace-789","timestamp":"2026-01-25T21:15:00Z","span_id":"00f067aa0ba902b7","event_id":"0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6b","schema_version":1}`,
		},
		{
			name: "retry_exhausted with stop_reason and context",
			e:    withContext,
			want: `{"level":"INFO","msg":"audit event","event_type":"retry_exhausted","retry_category":"RETRY_KV_GET","operation":"Get kill switch status","total_attempts":3,"final_exception_type":"TimeoutError","final_exception_message":"KV operation timeout","stop_reason":"deadline","tenant_id":"tenant-123","correlation_id":"corr-456","trace_id":"trace-789","timestamp":"2026-01-25T21:15:00Z","span_id":"00f067aa0ba902b8","event_id":"0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6c","schema_version":1,"additional_context":{"a":"x","z":1}}`,
		},
		{
			name: "empty fields omitted but event_type kept",
			e:    Event{Action: ActionTakeover},
			want: `{"level":"INFO","msg":"audit event","event_type":"","action":"takeover"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := NewSlog(newJSONLogger(&buf, slog.LevelInfo), slog.LevelInfo)
			require.NoError(t, s.Emit(context.Background(), tt.e))
			require.Equal(t, tt.want+"\n", buf.String())
		})
	}
}

// TestSlogAttrNames checks that every attribute is named like the JSON
// field of the same value.
func TestSlogAttrNames(t *testing.T) {
	for name, e := range goldenEvents() {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, NewSlog(newJSONLogger(&buf, slog.LevelInfo), slog.LevelInfo).Emit(context.Background(), e))
			var logged, encoded map[string]any
			require.NoError(t, json.Unmarshal(buf.Bytes(), &logged))
			require.NoError(t, json.Unmarshal(e.AppendJSON(nil), &encoded))
			delete(logged, "level")
			delete(logged, "msg")
			for k, v := range logged {
				require.Equal(t, encoded[k], v, "attribute %s", k)
			}
		})
	}
}

func TestSlogLevel(t *testing.T) {
	var buf bytes.Buffer
	l := newJSONLogger(&buf, slog.LevelWarn)
	require.NoError(t, NewSlog(l, slog.LevelInfo).Emit(context.Background(), Event{Type: "x"}))
	require.Empty(t, buf.String(), "below the handler's level")

	require.NoError(t, NewSlog(l, slog.LevelError).Emit(context.Background(), Event{Type: "x"}))
	require.True(t, strings.HasPrefix(buf.String(), `{"level":"ERROR","msg":"audit event"`), buf.String())
}

func TestSlogNilLoggerUsesDefault(t *testing.T) {
	// slog.SetDefault is process-wide; this test restores it and must not
	// run in parallel.
	old := slog.Default()
	t.Cleanup(func() { slog.SetDefault(old) })
	var buf bytes.Buffer
	slog.SetDefault(newJSONLogger(&buf, slog.LevelInfo))

	require.NoError(t, NewSlog(nil, slog.LevelInfo).Emit(context.Background(), Event{Type: "x"}))
	var zero Slog
	require.NoError(t, zero.Emit(context.Background(), Event{Type: "y"}))
	require.Equal(t,
		`{"level":"INFO","msg":"audit event","event_type":"x"}`+"\n"+
			`{"level":"INFO","msg":"audit event","event_type":"y"}`+"\n",
		buf.String())
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSlogHandlerError(t *testing.T) {
	s := NewSlog(slog.New(slog.NewJSONHandler(failingWriter{}, nil)), slog.LevelInfo)
	err := s.Emit(context.Background(), Event{Type: "x"})
	require.EqualError(t, err, "audit: slog: disk full")
}
