package test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// fastPolicy is a policy with seed 002's attempts for c and delays short
// enough for tests.
func fastPolicy(attempts int) retry.Policy {
	return retry.Policy{
		MaxAttempts: attempts,
		BaseDelay:   10 * time.Millisecond,
		MaxDelay:    50 * time.Millisecond,
		Multiplier:  2,
		Jitter:      retry.JitterNone,
	}
}

// fastManager returns a manager with seed 002's attempt counts, short
// delays, the overrides in ps, and an in-memory audit emitter.
func fastManager(t *testing.T, ps map[retry.Category]retry.Policy) (*retry.Manager, *audit.Memory) {
	t.Helper()
	policies := make(map[retry.Category]retry.Policy)
	for c, p := range categories.Defaults() {
		policies[c] = fastPolicy(p.MaxAttempts)
	}
	for c, p := range ps {
		policies[c] = p
	}
	mem := new(audit.Memory)
	mgr, err := categories.NewManager(retry.WithEmitter(mem), retry.WithPolicies(policies))
	require.NoError(t, err)
	return mgr, mem
}

// testCtx returns a context that bounds a test.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventsOf returns the events of type typ.
func eventsOf(mem *audit.Memory, typ audit.Type) []audit.Event {
	return mem.Filter(func(e audit.Event) bool { return e.Type == typ })
}

// requireRetryError checks err is a *retry.Error with the given reason and
// attempts, and returns it.
func requireRetryError(t *testing.T, err error, reason retry.StopReason, attempts int) *retry.Error {
	t.Helper()
	var re *retry.Error
	require.ErrorAs(t, err, &re)
	require.Equal(t, reason, re.Reason, "stop reason of %v", err)
	require.Equal(t, attempts, re.Attempts, "attempts of %v", err)
	return re
}

// requireExhaustedEvent checks that mem holds exactly one retry_exhausted
// event, for category cat with the given stop reason, attempts and final
// exception type, and returns it.
func requireExhaustedEvent(t *testing.T, mem *audit.Memory, cat retry.Category, reason string, attempts int, excType string) audit.Event {
	t.Helper()
	ex := eventsOf(mem, audit.TypeRetryExhausted)
	require.Len(t, ex, 1)
	e := ex[0]
	require.Equal(t, string(cat), e.Category)
	require.Equal(t, reason, e.StopReason)
	require.Equal(t, attempts, e.TotalAttempts)
	require.Equal(t, excType, e.FinalExceptionType)
	return e
}

// interceptJS wraps a JetStream so that tests can inject faults into
// PublishMsg and CreateOrUpdateStream. The hooks get the 1-based call
// number and the real call.
type interceptJS struct {
	jetstream.JetStream

	mu            sync.Mutex
	publishCalls  int
	streamCalls   int
	onPublish     func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error)
	onStreamWrite func(call int, real func() (jetstream.Stream, error)) (jetstream.Stream, error)
}

func (j *interceptJS) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	j.mu.Lock()
	j.publishCalls++
	n := j.publishCalls
	j.mu.Unlock()
	real := func() (*jetstream.PubAck, error) { return j.JetStream.PublishMsg(ctx, m, opts...) }
	if j.onPublish == nil {
		return real()
	}
	return j.onPublish(n, real)
}

func (j *interceptJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	j.mu.Lock()
	j.streamCalls++
	n := j.streamCalls
	j.mu.Unlock()
	real := func() (jetstream.Stream, error) { return j.JetStream.CreateOrUpdateStream(ctx, cfg) }
	if j.onStreamWrite == nil {
		return real()
	}
	return j.onStreamWrite(n, real)
}
