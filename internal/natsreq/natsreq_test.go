package natsreq_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/internal/natsreq"
	"github.com/jetretry/jetretry/internal/natstest"
)

// echo answers every request on subj with its own data, after delay(n)
// for the n-th request (from 0).
func echo(t *testing.T, nc *nats.Conn, subj string, delay func(n int64) time.Duration) {
	t.Helper()
	var n atomic.Int64
	_, err := nc.Subscribe(subj, func(m *nats.Msg) {
		if d := delay(n.Add(1) - 1); d > 0 {
			time.Sleep(d)
		}
		_ = m.Respond(m.Data)
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
}

func TestRequestsGetTheirOwnReplies(t *testing.T) {
	s := natstest.Start(t)
	echo(t, s.Connect(t), "echo", func(int64) time.Duration { return 0 })
	p := natsreq.New(s.Connect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := range 32 {
		wg.Go(func() {
			for i := range 50 {
				want := strconv.Itoa(g) + "/" + strconv.Itoa(i)
				r, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: []byte(want)})
				if err != nil {
					errs <- err
					return
				}
				if string(r.Data) != want {
					errs <- errors.New("got " + string(r.Data) + ", want " + want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSendThenWaitKeepsSeveralInFlight(t *testing.T) {
	s := natstest.Start(t)
	echo(t, s.Connect(t), "echo", func(int64) time.Duration { return 0 })
	p := natsreq.New(s.Connect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	a, err := p.Send(&nats.Msg{Subject: "echo", Data: []byte("a")})
	require.NoError(t, err)
	b, err := p.Send(&nats.Msg{Subject: "echo", Data: []byte("b")})
	require.NoError(t, err)
	rb, err := b.Wait(ctx)
	require.NoError(t, err)
	ra, err := a.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, "a", string(ra.Data))
	require.Equal(t, "b", string(rb.Data))
}

func TestNoResponders(t *testing.T) {
	s := natstest.Start(t)
	p := natsreq.New(s.Connect(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Request(ctx, &nats.Msg{Subject: "nobody.listens"})
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// A reply that arrives after its request timed out must not be taken for
// the reply to the next request made on the same (pooled) inbox.
func TestLateReplyIsNotTakenForTheNext(t *testing.T) {
	s := natstest.Start(t)
	echo(t, s.Connect(t), "echo", func(n int64) time.Duration {
		if n == 0 {
			return 300 * time.Millisecond
		}
		return 0
	})
	p := natsreq.New(s.Connect(t))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: []byte("first")})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)

	// One goroutine, so the pool hands back the same inbox; wait until
	// the late reply has surely arrived in it.
	time.Sleep(400 * time.Millisecond)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := p.Request(ctx, &nats.Msg{Subject: "echo", Data: []byte("second")})
	require.NoError(t, err)
	require.Equal(t, "second", string(r.Data))
}

func TestClosedConnection(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	p := natsreq.New(nc)
	nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Request(ctx, &nats.Msg{Subject: "echo"})
	require.ErrorIs(t, err, nats.ErrConnectionClosed)
}
