// Package natsreq makes NATS requests whose replies go straight to the
// goroutine waiting for them.
//
// A nats.go request's reply takes two goroutine hand-offs: the
// connection's read loop queues it for the shared reply subscription's
// goroutine, which passes it on to the requester. Under load on few cores
// each hand-off waits to be scheduled, and the shared goroutine serialises
// every reply of the connection. Here each requester borrows an inbox (a
// synchronous subscription of its own), so the read loop hands the reply
// to it directly.
//
// A borrowed inbox serves one request at a time. Every request gets a new
// reply subject under the inbox's wildcard, so a late reply to an earlier
// request that timed out is recognised and dropped.
package natsreq

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// maxIdle bounds the inboxes kept between requests; more are made when
// more requests are in flight and unsubscribed when returned.
const maxIdle = 256

// Pool makes requests on one connection. It is safe for concurrent use.
type Pool struct {
	nc   *nats.Conn
	mu   sync.Mutex
	idle []*inbox
}

type inbox struct {
	sub    *nats.Subscription
	prefix string // "<inbox>."
	n      uint64
}

// New returns a pool for nc.
func New(nc *nats.Conn) *Pool { return &Pool{nc: nc} }

// Request publishes m with a reply subject of its own and returns the
// reply. It returns nats.ErrNoResponders when the server reports that
// nothing listens on m's subject, ctx's error when ctx ends first, and
// the connection's error when it cannot publish or is closed. m.Reply is
// overwritten.
func (p *Pool) Request(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	c, err := p.Send(m)
	if err != nil {
		return nil, err
	}
	return c.Wait(ctx)
}

// Call is a request sent by Send. Its Wait must be called exactly once.
type Call struct {
	p     *Pool
	ib    *inbox
	reply string
}

// Send publishes m with a reply subject of its own, like Request, and
// returns at once, so that several requests can be in flight from one
// goroutine. m.Reply is overwritten.
func (p *Pool) Send(m *nats.Msg) (*Call, error) {
	ib, err := p.borrow()
	if err != nil {
		return nil, err
	}
	ib.n++
	m.Reply = ib.prefix + strconv.FormatUint(ib.n, 10)
	if err := p.nc.PublishMsg(m); err != nil {
		p.giveBack(ib, nil)
		return nil, err
	}
	return &Call{p: p, ib: ib, reply: m.Reply}, nil
}

// Wait returns the reply to c's request, with Request's errors.
func (c *Call) Wait(ctx context.Context) (*nats.Msg, error) {
	for {
		r, err := c.ib.sub.NextMsgWithContext(ctx)
		if err != nil {
			c.p.giveBack(c.ib, err)
			return nil, err
		}
		if r.Subject != c.reply {
			continue // a late reply to an earlier request
		}
		c.p.giveBack(c.ib, nil)
		if len(r.Data) == 0 && r.Header.Get("Status") == "503" {
			return nil, nats.ErrNoResponders
		}
		return r, nil
	}
}

func (p *Pool) borrow() (*inbox, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		ib := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return ib, nil
	}
	p.mu.Unlock()
	prefix := p.nc.NewInbox() + "."
	sub, err := p.nc.SubscribeSync(prefix + "*")
	if err != nil {
		return nil, err
	}
	return &inbox{sub: sub, prefix: prefix}, nil
}

// giveBack returns ib to the pool after a request that ended with err. An
// inbox whose subscription failed (not a mere timeout) is dropped.
func (p *Pool) giveBack(ib *inbox, err error) {
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		_ = ib.sub.Unsubscribe()
		return
	}
	p.mu.Lock()
	if len(p.idle) < maxIdle {
		p.idle = append(p.idle, ib)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	_ = ib.sub.Unsubscribe()
}
