package audit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
)

// env is an embedded server with the audit stream.
type env struct {
	s   *natstest.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg audit.StreamConfig
}

// fastReconnect makes clients notice a restarted server quickly.
var fastReconnect = []nats.Option{nats.ReconnectWait(50 * time.Millisecond), nats.MaxReconnects(-1)}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Start(t)
	nc, js := s.JetStream(t, fastReconnect...)
	cfg := audit.StreamConfig{}
	_, err := audit.EnsureStream(testCtx(t, 10*time.Second), js, cfg)
	require.NoError(t, err)
	return &env{s: s, nc: nc, js: js, cfg: cfg}
}

// testCtx returns a context that ends after d or with the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var base = time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC)

// event returns a valid event of type typ; i makes it distinct.
func event(typ audit.Type, cat string, i int) audit.Event {
	e := audit.Event{
		Type:          typ,
		Category:      cat,
		Operation:     fmt.Sprintf("op %d", i),
		TenantID:      fmt.Sprintf("tenant-%d", i%3),
		CorrelationID: fmt.Sprintf("corr-%d", i),
		TraceID:       "trace-789",
		Timestamp:     base.Add(time.Duration(i) * time.Second),
		EventID:       audit.NewEventID(),
		SchemaVersion: audit.SchemaVersion,
	}
	switch typ {
	case audit.TypeRetryAttempt:
		e.AttemptNumber, e.MaxAttempts, e.DelaySeconds = 1, 3, 0.5
		e.ExceptionType, e.ExceptionMessage = "TimeoutError", "Connection timeout"
	case audit.TypeRetryExhausted:
		e.TotalAttempts, e.FinalExceptionType, e.FinalExceptionMessage = 3, "TimeoutError", "KV operation timeout"
		e.StopReason = "exhausted"
	case audit.TypeIdempotency:
		e.IdempotencyKey, e.Action = "abc123", audit.ActionHit
	}
	return e
}
