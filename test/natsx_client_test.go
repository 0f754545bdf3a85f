package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

func newClient(t *testing.T, nc *nats.Conn, mgr *retry.Manager, opts ...natsx.ClientOption) *natsx.Client {
	t.Helper()
	c, err := natsx.New(nc, mgr, opts...)
	require.NoError(t, err)
	return c
}

func TestNATSXNew(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	mgr, _ := fastManager(t, nil)

	_, err := natsx.New(nil, mgr)
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)
	_, err = natsx.New(nc, nil)
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)
	_, err = natsx.New(nc, mgr, natsx.WithTimeout(0))
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)
	_, err = natsx.New(nc, mgr, nil)
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)

	var zero natsx.Client
	err = zero.Publish(testCtx(t), "a", nil)
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)
	require.True(t, retry.IsPermanent(err))
	var nilClient *natsx.Client
	_, err = nilClient.Request(testCtx(t), "a", nil)
	require.ErrorIs(t, err, natsx.ErrInvalidConfig)
}

func TestNATSXPublishRequestSubscribe(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	c := newClient(t, s.Connect(t), mgr)
	ctx := testCtx(t)

	// A responder subscribed through the client.
	sub, err := c.Subscribe(ctx, "svc.echo", func(m *nats.Msg) {
		_ = m.Respond(append([]byte("echo: "), m.Data...))
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	reply, err := c.Request(ctx, "svc.echo", []byte("hi"), retry.WithTenant("t1"))
	require.NoError(t, err)
	require.Equal(t, "echo: hi", string(reply.Data))

	// A wildcard subscription sees a publish.
	got := make(chan *nats.Msg, 1)
	_, err = c.Subscribe(ctx, "orders.*", func(m *nats.Msg) { got <- m })
	require.NoError(t, err)
	msg := nats.NewMsg("orders.created")
	msg.Data = []byte("o-1")
	msg.Header.Set("X-Test", "yes")
	require.NoError(t, c.PublishMsg(ctx, msg))
	select {
	case m := <-got:
		require.Equal(t, "o-1", string(m.Data))
		require.Equal(t, "yes", m.Header.Get("X-Test"))
	case <-time.After(5 * time.Second):
		t.Fatal("message not delivered")
	}

	// A queue subscription.
	qgot := make(chan string, 1)
	_, err = c.QueueSubscribe(ctx, "jobs.>", "workers", func(m *nats.Msg) { qgot <- m.Subject })
	require.NoError(t, err)
	require.NoError(t, c.Publish(ctx, "jobs.a.b", nil))
	select {
	case subj := <-qgot:
		require.Equal(t, "jobs.a.b", subj)
	case <-time.After(5 * time.Second):
		t.Fatal("message not delivered to the queue group")
	}

	// Without flushing.
	nf := newClient(t, c.Conn(), mgr, natsx.WithoutFlush())
	require.NoError(t, nf.Publish(ctx, "orders.updated", []byte("o-2")))
	select {
	case m := <-got:
		require.Equal(t, "orders.updated", m.Subject)
	case <-time.After(5 * time.Second):
		t.Fatal("message not delivered")
	}

	require.Zero(t, mem.Len(), "no failures, no events")
}

func TestNATSXBadArgumentsFailWithoutAttempt(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	c := newClient(t, s.Connect(t), mgr)
	ctx := testCtx(t)
	_, js := s.JetStream(t)
	noop := func(*nats.Msg) {}

	publishes := []string{"", " ", "a b", "a..b", ".a", "a.", "a.*", "a.>", ">", "a\tb"}
	for _, subj := range publishes {
		t.Run(fmt.Sprintf("publish %q", subj), func(t *testing.T) {
			err := c.Publish(ctx, subj, nil)
			require.ErrorIs(t, err, nats.ErrBadSubject)
			require.True(t, retry.IsPermanent(err))
			var e *natsx.Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, "publish", e.Op)
			require.Equal(t, "nats.ErrBadSubject", retry.ErrorType(err))

			_, err = c.Request(ctx, subj, nil)
			require.ErrorIs(t, err, nats.ErrBadSubject)
			_, err = c.JetStreamPublish(ctx, js, subj, nil)
			require.ErrorIs(t, err, nats.ErrBadSubject)
		})
	}
	subscribes := []string{"", "a b", "a..b", "a.>.b", "a."}
	for _, subj := range subscribes {
		t.Run(fmt.Sprintf("subscribe %q", subj), func(t *testing.T) {
			_, err := c.Subscribe(ctx, subj, noop)
			require.ErrorIs(t, err, nats.ErrBadSubject)
			require.True(t, retry.IsPermanent(err))
		})
	}
	t.Run("others", func(t *testing.T) {
		_, err := c.Subscribe(ctx, "a", nil)
		require.ErrorIs(t, err, nats.ErrInvalidArg)
		_, err = c.QueueSubscribe(ctx, "a", "", noop)
		require.ErrorIs(t, err, nats.ErrBadQueueName)
		_, err = c.QueueSubscribe(ctx, "a", "q 1", noop)
		require.ErrorIs(t, err, nats.ErrBadQueueName)
		require.ErrorIs(t, c.PublishMsg(ctx, nil), nats.ErrInvalidMsg)
		_, err = c.RequestMsg(ctx, nil)
		require.ErrorIs(t, err, nats.ErrInvalidMsg)
		_, err = c.JetStreamPublishMsg(ctx, js, nil)
		require.ErrorIs(t, err, nats.ErrInvalidMsg)
		_, err = c.JetStreamPublish(ctx, nil, "a", nil)
		require.ErrorIs(t, err, natsx.ErrInvalidConfig)
		_, err = c.CreateStream(ctx, js, jetstream.StreamConfig{})
		require.ErrorIs(t, err, jetstream.ErrStreamNameRequired)
		_, err = c.CreateStream(ctx, js, jetstream.StreamConfig{Name: "a.b"})
		require.ErrorIs(t, err, jetstream.ErrInvalidStreamName)
	})
	require.Zero(t, mem.Len(), "no attempt, no event")
}

func TestNATSXRequestNoRespondersIsRetriedThenExhausted(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	c := newClient(t, s.Connect(t), mgr)

	_, err := c.Request(testCtx(t), "svc.missing", []byte("x"), retry.WithCorrelation("c-9"))
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.ErrorIs(t, err, retry.ErrExhausted)
	requireRetryError(t, err, retry.StopExhausted, 3) // API_REQUEST: 3 attempts

	attempts := eventsOf(mem, audit.TypeRetryAttempt)
	require.Len(t, attempts, 2)
	for i, e := range attempts {
		require.Equal(t, string(categories.APIRequest), e.Category)
		require.Equal(t, "request to svc.missing", e.Operation)
		require.Equal(t, i+1, e.AttemptNumber)
		require.Equal(t, "nats.ErrNoResponders", e.ExceptionType)
		require.Equal(t, "c-9", e.CorrelationID)
	}
	requireExhaustedEvent(t, mem, categories.APIRequest, "exhausted", 3, "nats.ErrNoResponders")
}

func TestNATSXRequestSucceedsOnceResponderIsUp(t *testing.T) {
	s := natstest.Start(t)
	p := fastPolicy(50)
	mgr, mem := fastManager(t, map[retry.Category]retry.Policy{categories.APIRequest: p})
	nc := s.Connect(t)
	c := newClient(t, nc, mgr)

	go func() {
		// The responder comes up after the first failures.
		for len(eventsOf(mem, audit.TypeRetryAttempt)) < 2 {
			time.Sleep(5 * time.Millisecond)
		}
		_, _ = nc.Subscribe("svc.late", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
	}()
	reply, err := c.Request(testCtx(t), "svc.late", nil)
	require.NoError(t, err)
	require.Equal(t, "ok", string(reply.Data))
	require.GreaterOrEqual(t, len(eventsOf(mem, audit.TypeRetryAttempt)), 2)
	require.Empty(t, eventsOf(mem, audit.TypeRetryExhausted))
}

func TestNATSXPermissionViolationsArePermanent(t *testing.T) {
	s := natstest.Start(t, natstest.WithUsers(&server.User{
		Username: "limited",
		Password: "pw",
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Deny: []string{"secret.>"}},
			Subscribe: &server.SubjectPermission{Deny: []string{"secret.>"}},
		},
	}))
	mgr, mem := fastManager(t, nil)
	nc, err := natsx.Connect(testCtx(t), mgr, natsx.ConnectConfig{URL: s.URL(), User: "limited", Password: "pw"})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c := newClient(t, nc, mgr)
	ctx := testCtx(t)

	t.Run("subscribe", func(t *testing.T) {
		mem.Reset()
		called := make(chan struct{}, 1)
		sub, err := c.Subscribe(ctx, "secret.plans", func(*nats.Msg) { called <- struct{}{} })
		require.Nil(t, sub)
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		requireRetryError(t, err, retry.StopPermanent, 1)
		requireExhaustedEvent(t, mem, categories.NATSSubscribe, "permanent", 1, "nats.ErrPermissionViolation")
		require.Zero(t, nc.NumSubscriptions(), "the failed subscription is removed")
	})

	t.Run("queue subscribe", func(t *testing.T) {
		mem.Reset()
		_, err := c.QueueSubscribe(ctx, "secret.>", "q", func(*nats.Msg) {})
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		requireRetryError(t, err, retry.StopPermanent, 1)
	})

	t.Run("publish", func(t *testing.T) {
		mem.Reset()
		err := c.Publish(ctx, "secret.plans", []byte("x"))
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		requireRetryError(t, err, retry.StopPermanent, 1)
		requireExhaustedEvent(t, mem, categories.NATSPublish, "permanent", 1, "nats.ErrPermissionViolation")
	})

	t.Run("allowed subjects still work", func(t *testing.T) {
		mem.Reset()
		sub, err := c.Subscribe(ctx, "public.news", func(*nats.Msg) {})
		require.NoError(t, err)
		require.NoError(t, sub.Unsubscribe())
		require.NoError(t, c.Publish(ctx, "public.news", nil))
		require.Zero(t, mem.Len())
	})
}

func TestNATSXPublishOnClosedConnectionIsPermanent(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	nc := s.Connect(t)
	c := newClient(t, nc, mgr)
	nc.Close()
	err := c.Publish(testCtx(t), "a", nil)
	require.ErrorIs(t, err, nats.ErrConnectionClosed)
	requireRetryError(t, err, retry.StopPermanent, 1)
	requireExhaustedEvent(t, mem, categories.NATSPublish, "permanent", 1, "nats.ErrConnectionClosed")
}

func TestNATSXJetStreamPublishDeduplicatesRetries(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	nc, js := s.JetStream(t)
	c := newClient(t, nc, mgr)
	ctx := testCtx(t)
	stream, err := c.CreateStream(ctx, js, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
	require.NoError(t, err)

	// The first attempt stores the message but its ack is lost.
	lossy := &interceptJS{JetStream: js, onPublish: func(call int, real func() (*jetstream.PubAck, error)) (*jetstream.PubAck, error) {
		ack, err := real()
		if call == 1 {
			require.NoError(t, err)
			require.False(t, ack.Duplicate)
			return nil, nats.ErrTimeout
		}
		return ack, err
	}}
	ack, err := c.JetStreamPublish(ctx, lossy, "orders.created", []byte("o-1"), retry.WithTenant("t1"))
	require.NoError(t, err)
	require.True(t, ack.Duplicate, "the retry was deduplicated")
	require.Equal(t, uint64(1), ack.Sequence)
	require.Equal(t, 2, lossy.publishCalls)

	info, err := stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs, "one message stored")

	attempts := eventsOf(mem, audit.TypeRetryAttempt)
	require.Len(t, attempts, 1)
	require.Equal(t, string(categories.NATSPublish), attempts[0].Category)
	require.Equal(t, "jetstream publish to orders.created", attempts[0].Operation)
	require.Equal(t, "nats.ErrTimeout", attempts[0].ExceptionType)
	require.Equal(t, "t1", attempts[0].TenantID)

	raw, err := stream.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.NotEmpty(t, raw.Header.Get(jetstream.MsgIDHeader))

	// A caller-supplied id deduplicates across calls too.
	msg := nats.NewMsg("orders.created")
	msg.Data = []byte("o-2")
	msg.Header.Set(jetstream.MsgIDHeader, "order-2")
	first, err := c.JetStreamPublishMsg(ctx, js, msg)
	require.NoError(t, err)
	require.False(t, first.Duplicate)
	again, err := c.JetStreamPublishMsg(ctx, js, msg)
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, first.Sequence, again.Sequence)
	info, err = stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), info.State.Msgs)
	require.Equal(t, "order-2", msg.Header.Get(jetstream.MsgIDHeader), "msg is not modified")
	require.Len(t, msg.Header, 1)

	// Each call without an id gets its own.
	_, err = c.JetStreamPublish(ctx, js, "orders.created", []byte("o-3"))
	require.NoError(t, err)
	_, err = c.JetStreamPublish(ctx, js, "orders.created", []byte("o-3"))
	require.NoError(t, err)
	info, err = stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(4), info.State.Msgs)

	// With an idempotency key, the key is the Nats-Msg-Id: a second owner
	// (another process, or one that took over a crashed owner's claim)
	// publishing under the same key is deduplicated by the stream.
	for range 2 {
		store := idempotency.NewMemory(nil, 0)
		keyed, err := retry.NewManager(retry.WithStore(store))
		require.NoError(t, err)
		kc := newClient(t, nc, keyed)
		_, err = kc.JetStreamPublish(ctx, js, "orders.created", []byte("o-9"), retry.WithIdempotencyKey("order-9"))
		require.NoError(t, err)
	}
	info, err = stream.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(5), info.State.Msgs, "one message for the key")
	raw, err = stream.GetMsg(ctx, 5)
	require.NoError(t, err)
	require.Equal(t, "order-9", raw.Header.Get(jetstream.MsgIDHeader))
}

func TestNATSXJetStreamPublishWithoutStream(t *testing.T) {
	s := natstest.Start(t)
	mgr, mem := fastManager(t, nil)
	nc, js := s.JetStream(t)
	c := newClient(t, nc, mgr)
	_, err := c.JetStreamPublish(testCtx(t), js, "nowhere", nil)
	require.ErrorIs(t, err, jetstream.ErrNoStreamResponse)
	requireRetryError(t, err, retry.StopExhausted, 3)
	requireExhaustedEvent(t, mem, categories.NATSPublish, "exhausted", 3, "jetstream.ErrNoStreamResponse")
}

func TestNATSXCreateStream(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.JetStream(t)
	ctx := testCtx(t)

	t.Run("create, repeat, update", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		c := newClient(t, nc, mgr)
		cfg := jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}}
		st, err := c.CreateStream(ctx, js, cfg)
		require.NoError(t, err)
		require.Equal(t, "EVENTS", st.CachedInfo().Config.Name)

		_, err = c.CreateStream(ctx, js, cfg)
		require.NoError(t, err, "declaring the same stream again is fine")

		cfg.MaxMsgs = 100
		st, err = c.CreateStream(ctx, js, cfg)
		require.NoError(t, err)
		require.Equal(t, int64(100), st.CachedInfo().Config.MaxMsgs)
		require.Zero(t, mem.Len())
	})

	t.Run("a refused config is permanent", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		c := newClient(t, nc, mgr)
		_, err := c.CreateStream(ctx, js, jetstream.StreamConfig{Name: "OVERLAP", Subjects: []string{"events.a"}})
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr)
		requireRetryError(t, err, retry.StopPermanent, 1)
		e := requireExhaustedEvent(t, mem, categories.NATSStreamCreate, "permanent", 1, fmt.Sprintf("jetstream.APIError(%d)", apiErr.ErrorCode))
		require.Equal(t, "create or update stream OVERLAP", e.Operation)
	})

	t.Run("unavailability is retried", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		c := newClient(t, nc, mgr)
		flaky := &interceptJS{JetStream: js, onStreamWrite: func(call int, real func() (jetstream.Stream, error)) (jetstream.Stream, error) {
			if call == 1 {
				return nil, fmt.Errorf("nats: %w", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"})
			}
			return real()
		}}
		_, err := c.CreateStream(ctx, flaky, jetstream.StreamConfig{Name: "LATER", Subjects: []string{"later.>"}})
		require.NoError(t, err)
		attempts := eventsOf(mem, audit.TypeRetryAttempt)
		require.Len(t, attempts, 1)
		require.Equal(t, string(categories.NATSStreamCreate), attempts[0].Category)
		require.Equal(t, "jetstream.APIError(10008)", attempts[0].ExceptionType)
	})

	t.Run("the seed 002 budget is two attempts", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		c := newClient(t, nc, mgr)
		down := &interceptJS{JetStream: js, onStreamWrite: func(int, func() (jetstream.Stream, error)) (jetstream.Stream, error) {
			return nil, jetstream.ErrJetStreamNotEnabled
		}}
		_, err := c.CreateStream(ctx, down, jetstream.StreamConfig{Name: "NEVER"})
		require.True(t, errors.Is(err, jetstream.ErrJetStreamNotEnabled))
		requireRetryError(t, err, retry.StopExhausted, 2)
		requireExhaustedEvent(t, mem, categories.NATSStreamCreate, "exhausted", 2, "jetstream.ErrJetStreamNotEnabled")
	})
}

func TestNATSXSubscribeRetriesFlushTimeout(t *testing.T) {
	// A subscription made while the server is down is confirmed once it
	// is back: the flush times out, then succeeds on a later attempt.
	s := natstest.Start(t)
	p := fastPolicy(100)
	p.AttemptTimeout = 100 * time.Millisecond
	mgr, mem := fastManager(t, map[retry.Category]retry.Policy{categories.NATSSubscribe: p})
	nc := s.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	c := newClient(t, nc, mgr)
	s.Shutdown()
	require.Eventually(t, func() bool { return !nc.IsConnected() }, 5*time.Second, 5*time.Millisecond)

	type result struct {
		sub *nats.Subscription
		err error
	}
	done := make(chan result, 1)
	got := make(chan struct{}, 1)
	go func() {
		sub, err := c.Subscribe(context.Background(), "back.>", func(*nats.Msg) { got <- struct{}{} })
		done <- result{sub, err}
	}()
	require.Eventually(t, func() bool { return len(eventsOf(mem, audit.TypeRetryAttempt)) >= 1 }, 10*time.Second, 5*time.Millisecond)
	s.Up()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 1, nc.NumSubscriptions(), "retries reuse the subscription")
	require.NoError(t, nc.Publish("back.x", nil))
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("message not delivered")
	}
}
