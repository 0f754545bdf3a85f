package audit

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"
)

var _ Emitter = (*Slog)(nil)

// auditMessage is the message of every record Slog writes.
const auditMessage = "audit event"

// Slog is an Emitter that writes each event as one log/slog record with the
// message "audit event". It suits development and services that ship logs
// rather than a JetStream audit stream.
//
// The record's attributes are named like the JSON fields: event_type
// always, then each non-zero field among retry_category, operation,
// attempt_number, max_attempts, delay_seconds, exception_type,
// exception_message, total_attempts, final_exception_type,
// final_exception_message, stop_reason, idempotency_key, action, tenant_id,
// correlation_id, trace_id, timestamp (a time in UTC), span_id, event_id,
// schema_version and additional_context (a group with sorted keys). The
// record's own time is the time of Emit.
//
// The zero value logs to slog.Default() at slog.LevelInfo. A Slog is safe
// for concurrent use when its handler is, as slog handlers must be.
type Slog struct {
	logger *slog.Logger
	level  slog.Level
}

// NewSlog returns a Slog that logs to l at level. A nil l means
// slog.Default(), looked up at each Emit.
func NewSlog(l *slog.Logger, level slog.Level) *Slog {
	return &Slog{logger: l, level: level}
}

// Emit writes e as one record, or nothing when the handler is not enabled
// for the Slog's level. It returns the handler's error, wrapped and
// prefixed "audit: slog: ".
func (s *Slog) Emit(ctx context.Context, e Event) error {
	l := s.logger
	if l == nil {
		l = slog.Default()
	}
	h := l.Handler()
	if !h.Enabled(ctx, s.level) {
		return nil
	}
	r := slog.NewRecord(time.Now(), s.level, auditMessage, 0)
	r.AddAttrs(slogAttrs(e)...)
	if err := h.Handle(ctx, r); err != nil {
		return fmt.Errorf("audit: slog: %w", err)
	}
	return nil
}

// slogAttrs returns the attributes of e documented on Slog.
func slogAttrs(e Event) []slog.Attr {
	attrs := make([]slog.Attr, 0, 24)
	attrs = append(attrs, slog.String("event_type", string(e.Type)))
	str := func(key, v string) {
		if v != "" {
			attrs = append(attrs, slog.String(key, v))
		}
	}
	num := func(key string, v int) {
		if v != 0 {
			attrs = append(attrs, slog.Int(key, v))
		}
	}
	str("retry_category", e.Category)
	str("operation", e.Operation)
	num("attempt_number", e.AttemptNumber)
	num("max_attempts", e.MaxAttempts)
	if d := finite(e.DelaySeconds); d != 0 {
		attrs = append(attrs, slog.Float64("delay_seconds", d))
	}
	str("exception_type", e.ExceptionType)
	str("exception_message", e.ExceptionMessage)
	num("total_attempts", e.TotalAttempts)
	str("final_exception_type", e.FinalExceptionType)
	str("final_exception_message", e.FinalExceptionMessage)
	str("stop_reason", e.StopReason)
	str("idempotency_key", e.IdempotencyKey)
	str("action", string(e.Action))
	str("tenant_id", e.TenantID)
	str("correlation_id", e.CorrelationID)
	str("trace_id", e.TraceID)
	if !e.Timestamp.IsZero() {
		attrs = append(attrs, slog.Time("timestamp", e.Timestamp.UTC()))
	}
	str("span_id", e.SpanID)
	str("event_id", e.EventID)
	num("schema_version", e.SchemaVersion)
	if len(e.AdditionalContext) > 0 {
		ctx := make([]any, 0, len(e.AdditionalContext))
		for _, k := range slices.Sorted(maps.Keys(e.AdditionalContext)) {
			ctx = append(ctx, slog.Any(k, e.AdditionalContext[k]))
		}
		attrs = append(attrs, slog.Group("additional_context", ctx...))
	}
	return attrs
}
