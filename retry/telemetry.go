package retry

import (
	"context"
	"reflect"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName is the OpenTelemetry instrumentation scope.
const instrumentationName = "github.com/jetretry/jetretry/retry"

// Attribute keys used on spans and metrics.
const (
	attrCategory  = attribute.Key("jetretry.category")
	attrOperation = attribute.Key("jetretry.operation")
	attrAttempt   = attribute.Key("jetretry.attempt")
	attrAttempts  = attribute.Key("jetretry.attempts")
	attrDelay     = attribute.Key("jetretry.delay_seconds")
	attrOutcome   = attribute.Key("jetretry.outcome")
	attrReason    = attribute.Key("jetretry.stop_reason")
	attrAction    = attribute.Key("jetretry.idempotency.action")
	attrErrorType = attribute.Key("error.type")
)

// telemetry is the set of instruments built for one pair of providers.
// A nil tracer or nil meters mean that signal is off.
type telemetry struct {
	tp trace.TracerProvider
	mp metric.MeterProvider

	tracer trace.Tracer

	metersOn  bool
	attempts  metric.Int64Counter     // jetretry.attempts
	exhausted metric.Int64Counter     // jetretry.exhausted
	idem      metric.Int64Counter     // jetretry.idempotency
	delay     metric.Float64Histogram // jetretry.retry.delay

	sets sync.Map // Category -> attribute.Set
}

// isDefaultProvider reports whether p is the OpenTelemetry API's own
// default (a no-op, or the global delegate before any SDK is installed).
func isDefaultProvider(p any, delegateType string) bool {
	switch p.(type) {
	case tracenoop.TracerProvider, metricnoop.MeterProvider:
		return true
	}
	t := reflect.TypeOf(p)
	return t.String() == delegateType && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// telemetry returns the instruments for the current providers, building
// them when the providers changed (only the global ones can).
func (m *Manager) telemetry() *telemetry {
	tp, mp := m.tp, m.mp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if t := m.tel.Load(); t != nil && t.tp == tp && t.mp == mp {
		return t
	}
	t := &telemetry{tp: tp, mp: mp}
	if !isDefaultProvider(tp, "*global.tracerProvider") {
		t.tracer = tp.Tracer(instrumentationName)
	}
	if !isDefaultProvider(mp, "*global.meterProvider") {
		t.build(mp.Meter(instrumentationName), m)
	}
	m.tel.Store(t)
	return t
}

func (t *telemetry) build(meter metric.Meter, m *Manager) {
	var err error
	report := func(e error) {
		if e != nil && err == nil {
			err = e
		}
	}
	var e error
	t.attempts, e = meter.Int64Counter("jetretry.attempts",
		metric.WithDescription("Attempts made, by category and outcome (success, retry, failure)."),
		metric.WithUnit("{attempt}"))
	report(e)
	t.exhausted, e = meter.Int64Counter("jetretry.exhausted",
		metric.WithDescription("Calls that failed, by category and stop reason."),
		metric.WithUnit("{call}"))
	report(e)
	t.idem, e = meter.Int64Counter("jetretry.idempotency",
		metric.WithDescription("Idempotency decisions, by category and action (hit, record, takeover)."),
		metric.WithUnit("{event}"))
	report(e)
	t.delay, e = meter.Float64Histogram("jetretry.retry.delay",
		metric.WithDescription("Backoff delays scheduled before a retry."),
		metric.WithUnit("s"))
	report(e)
	if err != nil {
		m.logger.Warn("jetretry: metrics disabled", "error", err)
		return
	}
	t.metersOn = true
}

// categorySet returns the cached attribute set for category c.
func (t *telemetry) categorySet(c Category) attribute.Set {
	if s, ok := t.sets.Load(c); ok {
		return s.(attribute.Set)
	}
	s := attribute.NewSet(attrCategory.String(string(c)))
	t.sets.Store(c, s)
	return s
}

func (t *telemetry) countAttempt(ctx context.Context, c Category, outcome string) {
	if !t.metersOn {
		return
	}
	t.attempts.Add(ctx, 1, metric.WithAttributeSet(t.categorySet(c)), metric.WithAttributes(attrOutcome.String(outcome)))
}

func (t *telemetry) countExhausted(ctx context.Context, c Category, r StopReason) {
	if !t.metersOn {
		return
	}
	t.exhausted.Add(ctx, 1, metric.WithAttributeSet(t.categorySet(c)), metric.WithAttributes(attrReason.String(r.String())))
}

func (t *telemetry) countIdempotency(ctx context.Context, c Category, action string) {
	if !t.metersOn {
		return
	}
	t.idem.Add(ctx, 1, metric.WithAttributeSet(t.categorySet(c)), metric.WithAttributes(attrAction.String(action)))
}

func (t *telemetry) recordDelay(ctx context.Context, c Category, seconds float64) {
	if !t.metersOn {
		return
	}
	t.delay.Record(ctx, seconds, metric.WithAttributeSet(t.categorySet(c)))
}
