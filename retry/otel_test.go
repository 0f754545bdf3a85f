package retry_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
)

type otelFixture struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
	em     *audit.Memory
	mgr    *retry.Manager
}

func newOtelFixture(t *testing.T, opts ...retry.ManagerOption) *otelFixture {
	t.Helper()
	f := &otelFixture{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), em: &audit.Memory{}}
	f.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	t.Cleanup(func() {
		_ = f.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	m, err := retry.NewManager(append([]retry.ManagerOption{retry.WithTracerProvider(f.tp), retry.WithMeterProvider(mp),
		retry.WithEmitter(f.em), retry.WithDefaultPolicy(policy(3, 0, 0))}, opts...)...)
	require.NoError(t, err)
	f.mgr = m
	return f
}

// sums returns each Int64 sum data point of metric name, keyed by the
// value of attribute key.
func (f *otelFixture) sums(t *testing.T, name, key string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key(key))
				cat, _ := dp.Attributes.Value("jetretry.category")
				require.Equal(t, string(testCat), cat.AsString())
				out[v.Emit()] += dp.Value
			}
		}
	}
	return out
}

func (f *otelFixture) histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, f.reader.Collect(context.Background(), &rm))
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					n += dp.Count
				}
			}
		}
	}
	return n
}

func TestTelemetrySpanEventsAndMetrics(t *testing.T) {
	f := newOtelFixture(t)
	ctx, parent := f.tp.Tracer("test").Start(context.Background(), "parent")
	n := 0
	v, err := retry.Do(ctx, f.mgr, testCat, "op", func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, io.EOF
		}
		return n, nil
	})
	parent.End()
	require.NoError(t, err)
	require.Equal(t, 3, v)

	var span sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if s.Name() == string(testCat) {
			span = s
		}
	}
	require.NotNil(t, span, "a span per Do")
	require.Equal(t, parent.SpanContext().TraceID(), span.SpanContext().TraceID())
	require.Equal(t, parent.SpanContext().SpanID(), span.Parent().SpanID())
	events := span.Events()
	require.Len(t, events, 3, "an event per attempt")
	outcomes := []string{}
	for _, e := range events {
		for _, a := range e.Attributes {
			if a.Key == "jetretry.outcome" {
				outcomes = append(outcomes, a.Value.AsString())
			}
		}
	}
	require.Equal(t, []string{"retry", "retry", "success"}, outcomes)
	require.Contains(t, events[0].Attributes, attribute.String("error.type", "*errors.errorString"))
	require.Equal(t, codes.Unset, span.Status().Code)

	// trace_id defaults to the span in the context.
	for _, e := range f.em.Events() {
		require.Equal(t, parent.SpanContext().TraceID().String(), e.TraceID)
	}

	require.Equal(t, map[string]int64{"retry": 2, "success": 1}, f.sums(t, "jetretry.attempts", "jetretry.outcome"))
	require.Equal(t, uint64(2), f.histogramCount(t, "jetretry.retry.delay"))
}

func TestTelemetryFailure(t *testing.T) {
	f := newOtelFixture(t)
	_, err := retry.Do(context.Background(), f.mgr, testCat, "op", func(context.Context) (int, error) {
		return 0, errors.New("boom")
	})
	require.ErrorIs(t, err, retry.ErrExhausted)
	spans := f.spans.Ended()
	require.Len(t, spans, 1)
	require.Equal(t, codes.Error, spans[0].Status().Code)
	require.Contains(t, spans[0].Attributes(), attribute.String("error.type", "*errors.errorString"))
	require.Contains(t, spans[0].Attributes(), attribute.String("jetretry.stop_reason", "exhausted"))
	require.Contains(t, spans[0].Attributes(), attribute.Int("jetretry.attempts", 3))
	require.Equal(t, map[string]int64{"exhausted": 1}, f.sums(t, "jetretry.exhausted", "jetretry.stop_reason"))
	require.Equal(t, map[string]int64{"retry": 2, "failure": 1}, f.sums(t, "jetretry.attempts", "jetretry.outcome"))
}

func TestTelemetryIdempotencyCounter(t *testing.T) {
	f := newOtelFixture(t, retry.WithStore(idempotency.NewMemory(nil, 0)))
	m := f.mgr
	for i := 0; i < 3; i++ {
		_, err := retry.Do(context.Background(), m, testCat, "op", func(context.Context) (int, error) { return 1, nil },
			retry.WithIdempotencyKey("k"))
		require.NoError(t, err)
	}
	require.Equal(t, map[string]int64{"record": 1, "hit": 2}, f.sums(t, "jetretry.idempotency", "jetretry.idempotency.action"))
}

func TestTelemetryFollowsGlobalProvider(t *testing.T) {
	m, err := retry.NewManager(retry.WithDefaultPolicy(policy(1, 0, 0)))
	require.NoError(t, err)
	ok := func(context.Context) (int, error) { return 1, nil }
	_, err = retry.Do(context.Background(), m, testCat, "op", ok)
	require.NoError(t, err, "works with no SDK installed")

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(tracenoop.NewTracerProvider()) })
	_, err = retry.Do(context.Background(), m, testCat, "op", ok)
	require.NoError(t, err)
	require.Len(t, spans.Ended(), 1, "a provider installed after NewManager is used")
}
