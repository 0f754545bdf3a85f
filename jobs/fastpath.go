package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/internal/jsonx"
	"github.com/jetretry/jetretry/internal/natsreq"
)

// fastPath makes the calls on every job's path (record reads and
// compare-and-set writes, dispatch publishes) as the requests nats.go's
// KeyValue and Publish make, on a natsreq.Pool: each reply goes straight
// to its caller instead of through the connection's shared reply
// goroutine, which on few cores was the worker's bottleneck. It also
// skips their per-call key check (ids are hex digests) and decodes
// publish acknowledgements without reflection.
//
// It is used when the client talks to JetStream in its own account with
// the default API prefix and the bucket allows direct gets (jobs.New
// creates it so); otherwise the client uses nats.go's KeyValue.
type fastPath struct {
	req     *natsreq.Pool
	timeout time.Duration // for calls whose context has no deadline
	getPre  string        // "$JS.API.DIRECT.GET.KV_<bucket>.$KV.<bucket>."
	putPre  string        // "$KV.<bucket>."
}

// newFastPath returns the fast path for kv, whose stream is sc, on js, or
// nil when it does not apply.
func newFastPath(js jetstream.JetStream, kv jetstream.KeyValue, sc jetstream.StreamConfig) *fastPath {
	o := js.Options()
	if o.APIPrefix != "" || o.Domain != "" || js.Conn() == nil || !sc.AllowDirect || sc.Mirror != nil {
		return nil
	}
	timeout := o.DefaultTimeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &fastPath{
		req: natsreq.New(js.Conn()), timeout: timeout,
		getPre: jetstream.DefaultAPIPrefix + "DIRECT.GET." + sc.Name + ".$KV." + kv.Bucket() + ".",
		putPre: "$KV." + kv.Bucket() + ".",
	}
}

func (f *fastPath) request(ctx context.Context, m *nats.Msg) (*nats.Msg, error) {
	ctx, cancel := boundedContext(ctx, f.timeout)
	defer cancel()
	return f.req.Request(ctx, m)
}

// boundedContext returns ctx, bounded by timeout when it has no deadline
// (as nats.go's JetStream calls are), and its cancel function.
func boundedContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, timeout)
}

// get reads the last value of id: its data and revision, or
// jetstream.ErrKeyNotFound when it has none or was deleted.
func (f *fastPath) get(ctx context.Context, id string) ([]byte, uint64, error) {
	r, err := f.request(ctx, &nats.Msg{Subject: f.getPre + id})
	if err != nil {
		return nil, 0, err
	}
	if len(r.Data) == 0 {
		switch s := r.Header.Get("Status"); s {
		case "404":
			return nil, 0, jetstream.ErrKeyNotFound
		case "":
		default:
			return nil, 0, fmt.Errorf("direct get of %s: status %s %s", id, s, r.Header.Get("Description"))
		}
	}
	if isMarker(r.Header) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	rev, err := strconv.ParseUint(r.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return nil, 0, fmt.Errorf("direct get of %s: bad sequence header: %w", id, err)
	}
	return r.Data, rev, nil
}

// isMarker reports whether a KV message with headers h is a delete, purge
// or expiry marker rather than a value.
func isMarker(h nats.Header) bool {
	return h.Get("KV-Operation") != "" || h.Get(jetstream.MarkerReasonHeader) != ""
}

// update writes b as id's value if its last revision is rev (0: no
// value). A conflict is an *jetstream.APIError, as from KeyValue.Update.
func (f *fastPath) update(ctx context.Context, id string, b []byte, rev uint64) (uint64, error) {
	m := &nats.Msg{Subject: f.putPre + id, Data: b, Header: nats.Header{}}
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = []string{strconv.FormatUint(rev, 10)}
	return f.publish(ctx, m)
}

// publish publishes m to a stream and returns its sequence.
func (f *fastPath) publish(ctx context.Context, m *nats.Msg) (uint64, error) {
	c, err := f.req.Send(m)
	if err != nil {
		return 0, err
	}
	return f.ack(ctx, c)
}

// ack waits for the acknowledgement of a publish sent with f.req.Send and
// returns its sequence.
func (f *fastPath) ack(ctx context.Context, c *natsreq.Call) (uint64, error) {
	ctx, cancel := boundedContext(ctx, f.timeout)
	defer cancel()
	r, err := c.Wait(ctx)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return 0, jetstream.ErrNoStreamResponse
		}
		return 0, err
	}
	return parsePubAck(r.Data)
}

// parsePubAck returns the sequence of a publish acknowledgement, or the
// API error it carries.
func parsePubAck(b []byte) (uint64, error) {
	var (
		seq    uint64
		hasSeq bool
		apiErr *jetstream.APIError
	)
	ok := jsonx.Fields(b, func(name, raw []byte) bool {
		switch string(name) {
		case "seq":
			n, err := strconv.ParseUint(string(raw), 10, 64)
			seq, hasSeq = n, err == nil
			return err == nil
		case "error":
			apiErr = new(jetstream.APIError)
			return json.Unmarshal(raw, apiErr) == nil
		}
		return true
	})
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: %q", jetstream.ErrInvalidJetStreamResponse, b)
	case apiErr != nil:
		return 0, apiErr
	case !hasSeq:
		return 0, jetstream.ErrInvalidJetStreamResponse
	}
	return seq, nil
}
