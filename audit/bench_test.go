package audit_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
)

// benchEvent is a typical retry_attempt event, about 450 bytes of JSON.
func benchEvent() audit.Event {
	return audit.Event{
		Type:             audit.TypeRetryAttempt,
		Category:         "RETRY_NATS_PUBLISH",
		Operation:        "Publish to orders.created.v1",
		AttemptNumber:    2,
		MaxAttempts:      3,
		DelaySeconds:     1.05,
		ExceptionType:    "TimeoutError",
		ExceptionMessage: "nats: timeout",
		TenantID:         "tenant-123",
		CorrelationID:    "corr-456",
		TraceID:          "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:           "00f067aa0ba902b7",
		Timestamp:        time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC),
		SchemaVersion:    audit.SchemaVersion,
	}
}

// BenchmarkPublisherEmit measures events per second through to the
// stream's ack: each op emits one event with a fresh event_id, and the
// timed region ends with a Flush (so it uses b.N, not b.Loop, whose timer
// stops with the loop); allocations of the background goroutine count. The raw baseline does what a caller
// would do by hand with the same event: encode it, PublishAsync it with
// the event_id as Nats-Msg-Id, then wait for all acks. Each sub-benchmark
// runs on its own embedded server. Compare with a fixed count, e.g.
// -benchtime=50000x.
func BenchmarkPublisherEmit(b *testing.B) {
	b.Run("raw-PublishAsync", func(b *testing.B) {
		js := benchStream(b)
		ctx := context.Background()
		e := benchEvent()
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			e.EventID = audit.NewEventID()
			buf = e.AppendJSON(buf[:0])
			data := append([]byte(nil), buf...) // PublishAsync keeps it until acked
			// A long stall wait: on a loaded machine the default 200ms can
			// fail the baseline with ErrTooManyStalledMsgs.
			if _, err := js.PublishAsync(audit.Subject(audit.DefaultSubjectPrefix, e), data,
				jetstream.WithMsgID(e.EventID), jetstream.WithStallWait(30*time.Second)); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
		case <-time.After(time.Minute):
			b.Fatal("acks did not come")
		}
		b.StopTimer()
	})
	for _, bc := range []struct {
		name   string
		buffer int
	}{
		{"Publisher/buffer=4096", 0},     // the default: bursts overflow to the spool
		{"Publisher/buffer=1M", 1 << 20}, // memory only
	} {
		b.Run(bc.name, func(b *testing.B) {
			js := benchStream(b)
			p, err := audit.NewPublisher(js, audit.PublisherConfig{
				SpoolDir: b.TempDir(), BufferSize: bc.buffer, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			e := benchEvent()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				e.EventID = audit.NewEventID()
				if err := p.Emit(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := p.Flush(fctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			st := p.Stats()
			b.ReportMetric(float64(st.Spooled)/float64(b.N), "spooled/op")
			if err := p.Close(fctx); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchStream starts a server with the audit stream.
func benchStream(b *testing.B) jetstream.JetStream {
	b.Helper()
	s := natstest.Start(b)
	_, js := s.JetStream(b)
	if _, err := audit.EnsureStream(context.Background(), js, audit.StreamConfig{}); err != nil {
		b.Fatal(err)
	}
	return js
}
