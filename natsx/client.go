package natsx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// DefaultTimeout bounds each attempt of a Client call whose context has no
// deadline, unless WithTimeout says otherwise. A context deadline (the
// caller's, or the policy's AttemptTimeout) always wins.
const DefaultTimeout = 5 * time.Second

// Client runs NATS operations on one connection, each under its retry
// category of one retry.Manager. Create it with New; the zero value fails
// every call with a *ConfigError. A Client is safe for concurrent use: it
// holds no per-call state.
//
// Every call takes the caller's retry.Options (tenant, correlation and
// trace ids, a per-call policy, an idempotency key, ...) and passes them to
// retry.Do; errors from nats.go are classified with Classify. Invalid
// arguments, such as a bad subject, fail at once with a permanent error,
// without an attempt or an audit event.
type Client struct {
	nc      *nats.Conn
	mgr     *retry.Manager
	noFlush bool
	timeout time.Duration
}

// ClientOption configures a Client.
type ClientOption func(*Client) error

// WithoutFlush makes Publish return once the message is handed to the
// connection, without the round trip to the server that confirms it was
// received and surfaces permission violations. It trades those checks
// for latency.
func WithoutFlush() ClientOption {
	return func(c *Client) error { c.noFlush = true; return nil }
}

// WithTimeout sets the bound of each attempt whose context has no
// deadline; DefaultTimeout by default. It must be positive.
func WithTimeout(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d <= 0 {
			return &ConfigError{Field: "WithTimeout", Reason: fmt.Sprintf("must be positive, got %v", d)}
		}
		c.timeout = d
		return nil
	}
}

// New returns a Client for nc whose calls retry under mgr's policies. It
// returns a *ConfigError when nc or mgr is nil or an option is bad. The
// caller still owns nc.
func New(nc *nats.Conn, mgr *retry.Manager, opts ...ClientOption) (*Client, error) {
	if nc == nil {
		return nil, &ConfigError{Field: "nc", Reason: "is nil"}
	}
	if mgr == nil {
		return nil, &ConfigError{Field: "mgr", Reason: "is nil"}
	}
	c := &Client{nc: nc, mgr: mgr, timeout: DefaultTimeout}
	for i, o := range opts {
		if o == nil {
			return nil, &ConfigError{Field: "opts", Reason: fmt.Sprintf("entry %d is nil", i)}
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Conn returns the client's connection.
func (c *Client) Conn() *nats.Conn {
	if c == nil {
		return nil
	}
	return c.nc
}

// ready reports a Client not created with New.
func (c *Client) ready() error {
	if c == nil || c.nc == nil || c.mgr == nil {
		return retry.Permanent(&ConfigError{Field: "Client", Reason: "must be created with New"})
	}
	return nil
}

// bound gives ctx the client's timeout when it has no deadline.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.timeout)
}

// invalid returns a permanent *Error for a bad argument of op.
func invalid(op, target string, err error) error {
	return retry.Permanent(&Error{Op: op, Target: target, Err: err})
}

// Publish publishes data to subj with core NATS, under the NATS_PUBLISH
// category. See PublishMsg.
func (c *Client) Publish(ctx context.Context, subj string, data []byte, opts ...retry.Option) error {
	return c.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: data}, opts...)
}

// PublishMsg publishes msg with core NATS, under the NATS_PUBLISH category
// (operation "publish to <subject>").
//
// Core NATS is at most once, and a core publish only fails locally: the
// message could not be handed to the connection (closed, draining, the
// reconnect buffer full, over the max payload). What is retried is that
// hand-off, and then, unless the Client was built WithoutFlush, a flush:
// a round trip that confirms the server has received the message and
// surfaces a publish permission violation, which is permanent. A
// retry never hands the message over twice, so a retried PublishMsg
// never publishes twice; once handed over, only the flush is retried. A
// message handed over is not taken back when the call fails afterwards.
//
// A subject that is empty, has whitespace, empty tokens or wildcards, or
// a nil msg, fails at once with a permanent *Error wrapping
// nats.ErrBadSubject or nats.ErrInvalidMsg. A failed call returns a
// *retry.Error whose Cause is an *Error.
func (c *Client) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...retry.Option) error {
	if err := c.ready(); err != nil {
		return err
	}
	if msg == nil {
		return invalid("publish", "", nats.ErrInvalidMsg)
	}
	subj := msg.Subject
	if err := checkSubject(subj, false); err != nil {
		return invalid("publish", subj, err)
	}
	before := c.nc.LastError()
	sent := false
	_, err := retry.Do(ctx, c.mgr, categories.NATSPublish, "publish to "+subj, func(actx context.Context) (struct{}, error) {
		if !sent {
			if err := c.nc.PublishMsg(msg); err != nil {
				return struct{}{}, fail("publish", subj, err)
			}
			sent = true
		}
		if c.noFlush {
			return struct{}{}, nil
		}
		return struct{}{}, c.flush(actx, before, "publish", "Publish", subj)
	}, opts...)
	return err
}

// flush flushes the connection and reports a permission violation for
// kind ("Publish" or "Subscription") on subj that arrived since before.
// The server answers a flush's PING after handling what was sent before
// it, so a violation shows by the time the flush returns.
func (c *Client) flush(ctx context.Context, before error, op, kind, subj string) error {
	fctx, cancel := c.bound(ctx)
	err := c.nc.FlushWithContext(fctx)
	cancel()
	if v := violation(c.nc, before, kind, subj); v != nil {
		return retry.Permanent(&Error{Op: op, Target: subj, Err: v})
	}
	if err != nil {
		return fail(op, subj, err)
	}
	return nil
}

// violation returns the connection's last error if it is a permission
// violation for kind on subj that is not before, or nil. nats.go reports
// these asynchronously (the connection's last error and error handler),
// not from the call that caused them.
func violation(nc *nats.Conn, before error, kind, subj string) error {
	err := nc.LastError()
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) {
		return nil
	}
	if !strings.Contains(err.Error(), kind+` to "`+subj+`"`) {
		return nil
	}
	// Compared last: nats.go's violation errors are pointers, so the
	// comparison cannot panic on a non-comparable error type.
	if err == before {
		return nil
	}
	return err
}

// Request sends data to subj and waits for one reply. See RequestMsg.
func (c *Client) Request(ctx context.Context, subj string, data []byte, opts ...retry.Option) (*nats.Msg, error) {
	return c.RequestMsg(ctx, &nats.Msg{Subject: subj, Data: data}, opts...)
}

// RequestMsg sends msg and waits for one reply, under the API_REQUEST
// category (operation "request to <subject>"). Seed 002 has no category
// for NATS request/reply; a request is a call to a service's API, so it
// gets API_REQUEST's policy (3 attempts, 1 s base, 30 s max) rather than
// NATS_PUBLISH's, which is tuned for fire-and-forget.
//
// A timeout (nats.ErrTimeout or the attempt's deadline) and no responders
// (nats.ErrNoResponders: the service is not up yet) are retried. A retry
// sends the request again, and the responder may already have acted on an
// earlier one whose reply was lost: requests to non-idempotent services
// need retry.NotIdempotent (no retry) or an idempotency key honoured by
// the responder. Each attempt is bounded by its context deadline, or by
// the Client's timeout when there is none.
//
// Bad subjects and a nil msg fail at once, as with PublishMsg. A failed
// call returns a *retry.Error whose Cause is an *Error.
func (c *Client) RequestMsg(ctx context.Context, msg *nats.Msg, opts ...retry.Option) (*nats.Msg, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if msg == nil {
		return nil, invalid("request", "", nats.ErrInvalidMsg)
	}
	subj := msg.Subject
	if err := checkSubject(subj, false); err != nil {
		return nil, invalid("request", subj, err)
	}
	return retry.Do(ctx, c.mgr, categories.APIRequest, "request to "+subj, func(actx context.Context) (*nats.Msg, error) {
		rctx, cancel := c.bound(actx)
		defer cancel()
		reply, err := c.nc.RequestMsgWithContext(rctx, msg)
		if err != nil {
			return nil, fail("request", subj, err)
		}
		return reply, nil
	}, opts...)
}

// Subscribe subscribes handler to subj. See QueueSubscribe.
func (c *Client) Subscribe(ctx context.Context, subj string, handler nats.MsgHandler, opts ...retry.Option) (*nats.Subscription, error) {
	return c.subscribe(ctx, subj, "", handler, opts)
}

// QueueSubscribe subscribes handler to subj in queue group queue, under
// the NATS_SUBSCRIBE category (operation "subscribe to <subject>").
//
// Each attempt subscribes (once: a retry reuses the subscription) and
// flushes the connection, so that the call returns only after the server
// has accepted the subscription. A subscribe permission violation is
// permanent; a flush timeout or a reconnect is retried. When the call
// fails, the subscription is removed, so the handler never runs.
//
// Subjects may contain wildcards ("*" tokens, ">" as the last token);
// empty subjects, whitespace and empty tokens fail at once with a
// permanent *Error wrapping nats.ErrBadSubject, as does a nil handler
// (nats.ErrInvalidArg) or an empty queue name or one with whitespace
// (nats.ErrBadQueueName). A
// failed call returns a *retry.Error whose Cause is an *Error. Subscribe
// is the same without a queue group.
func (c *Client) QueueSubscribe(ctx context.Context, subj, queue string, handler nats.MsgHandler, opts ...retry.Option) (*nats.Subscription, error) {
	if err := checkQueue(queue); err != nil {
		return nil, invalid("subscribe", subj, err)
	}
	return c.subscribe(ctx, subj, queue, handler, opts)
}

func (c *Client) subscribe(ctx context.Context, subj, queue string, handler nats.MsgHandler, opts []retry.Option) (*nats.Subscription, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if err := checkSubject(subj, true); err != nil {
		return nil, invalid("subscribe", subj, err)
	}
	if handler == nil {
		return nil, invalid("subscribe", subj, fmt.Errorf("%w: nil handler", nats.ErrInvalidArg))
	}
	before := c.nc.LastError()
	var sub *nats.Subscription
	got, err := retry.Do(ctx, c.mgr, categories.NATSSubscribe, "subscribe to "+subj, func(actx context.Context) (*nats.Subscription, error) {
		if sub == nil || !sub.IsValid() {
			var err error
			if queue == "" {
				sub, err = c.nc.Subscribe(subj, handler)
			} else {
				sub, err = c.nc.QueueSubscribe(subj, queue, handler)
			}
			if err != nil {
				sub = nil
				return nil, fail("subscribe", subj, err)
			}
		}
		if err := c.flush(actx, before, "subscribe", "Subscription", subj); err != nil {
			return nil, err
		}
		return sub, nil
	}, opts...)
	if err != nil {
		if sub != nil {
			_ = sub.Unsubscribe()
		}
		return nil, err
	}
	return got, nil
}

// JetStreamPublish publishes data to subj on js and waits for the stream's
// ack. See JetStreamPublishMsg.
func (c *Client) JetStreamPublish(ctx context.Context, js jetstream.JetStream, subj string, data []byte, opts ...retry.Option) (*jetstream.PubAck, error) {
	return c.JetStreamPublishMsg(ctx, js, &nats.Msg{Subject: subj, Data: data}, opts...)
}

// JetStreamPublishMsg publishes msg on js and waits for the stream's ack,
// under the NATS_PUBLISH category (operation "jetstream publish to
// <subject>").
//
// Every attempt carries the same Nats-Msg-Id (jetstream.MsgIDHeader): the
// one in msg's header if the caller set it; else the call's idempotency key
// (retry.WithIdempotencyKey), which makes the publish idempotent across
// calls and across a takeover of a crashed owner's claim, within the
// stream's duplicate window; otherwise a new UUIDv7, which makes the
// retries of this call idempotent. So when an attempt's ack is lost (a
// timeout) but the message was stored, the retry is deduplicated by the
// stream instead of storing it twice, and its PubAck has Duplicate set.
// msg itself is not modified.
//
// Timeouts, no responders (jetstream.ErrNoStreamResponse: no stream yet,
// or a leader election) and 503s are retried; jetstream's own
// no-responders retries are turned off so that the policy alone decides.
// Expectations set in headers (jetstream.ExpectedLastSeqHeader, ...) that
// fail are permanent. Bad subjects fail at once, as with PublishMsg. A
// failed call returns a *retry.Error whose Cause is an *Error.
func (c *Client) JetStreamPublishMsg(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, opts ...retry.Option) (*jetstream.PubAck, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, retry.Permanent(&ConfigError{Field: "js", Reason: "is nil"})
	}
	if msg == nil {
		return nil, invalid("jetstream publish", "", nats.ErrInvalidMsg)
	}
	subj := msg.Subject
	if err := checkSubject(subj, false); err != nil {
		return nil, invalid("jetstream publish", subj, err)
	}
	m := &nats.Msg{Subject: subj, Reply: msg.Reply, Data: msg.Data, Header: make(nats.Header, len(msg.Header)+1)}
	for k, v := range msg.Header {
		m.Header[k] = append([]string(nil), v...)
	}
	return retry.Do(ctx, c.mgr, categories.NATSPublish, "jetstream publish to "+subj, func(actx context.Context) (*jetstream.PubAck, error) {
		if m.Header.Get(jetstream.MsgIDHeader) == "" {
			// Chosen at the first attempt and kept by the others. With an
			// idempotency key, a run that takes over a crashed owner's
			// claim publishes under the same id, so the stream drops the
			// copy the crashed owner may have stored.
			if a, ok := retry.AttemptFrom(actx); ok && a.IdempotencyKey != "" {
				m.Header.Set(jetstream.MsgIDHeader, a.IdempotencyKey)
			} else {
				id, err := uuid.NewV7()
				if err != nil {
					id = uuid.New()
				}
				m.Header.Set(jetstream.MsgIDHeader, id.String())
			}
		}
		pctx, cancel := c.bound(actx)
		defer cancel()
		ack, err := js.PublishMsg(pctx, m, jetstream.WithRetryAttempts(0))
		if err != nil {
			return nil, fail("jetstream publish", subj, err)
		}
		return ack, nil
	}, opts...)
}

// CreateStream creates the stream cfg describes, or updates it to cfg if
// it exists, under the NATS_STREAM_CREATE category (operation "create or
// update stream <name>"). It has jetstream's CreateOrUpdateStream
// semantics, which is what makes it safe to retry: an attempt whose reply
// was lost after the stream was made finds it on the next attempt and
// leaves it as it is; and services can declare their streams at every
// start.
//
// A config the server refuses (an invalid config, subjects overlapping
// another stream, a change it cannot make such as the storage type) is
// permanent; cluster unavailability is retried. An empty or invalid name
// fails at once with a permanent *Error wrapping
// jetstream.ErrStreamNameRequired or jetstream.ErrInvalidStreamName. A
// failed call returns a *retry.Error whose Cause is an *Error.
func (c *Client) CreateStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig, opts ...retry.Option) (jetstream.Stream, error) {
	if err := c.ready(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, retry.Permanent(&ConfigError{Field: "js", Reason: "is nil"})
	}
	switch {
	case cfg.Name == "":
		return nil, invalid("create stream", "", jetstream.ErrStreamNameRequired)
	case strings.ContainsAny(cfg.Name, " \t\r\n.*>/\\"):
		return nil, invalid("create stream", cfg.Name, jetstream.ErrInvalidStreamName)
	}
	return retry.Do(ctx, c.mgr, categories.NATSStreamCreate, "create or update stream "+cfg.Name, func(actx context.Context) (jetstream.Stream, error) {
		sctx, cancel := c.bound(actx)
		defer cancel()
		s, err := js.CreateOrUpdateStream(sctx, cfg)
		if err != nil {
			return nil, fail("create stream", cfg.Name, err)
		}
		return s, nil
	}, opts...)
}
