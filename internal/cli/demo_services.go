package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/kvx"
	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

// The simulated services of the demo. Each category's operations go
// through the library the way a service would use it:
//
//   - NATS_CONNECT: natsx.Connect of a fresh connection, through a dialer
//     that fails as planned (refused dials, a connection limit with a
//     retry-after hint, an authorization failure).
//   - NATS_PUBLISH: natsx.JetStreamPublish of an order to the demo stream
//     (the ack lost, a 429 with a hint; an expected-stream header that
//     does not match is a real permanent error), or a core natsx.Publish.
//   - NATS_SUBSCRIBE: natsx.Subscribe on a connection whose replies are
//     held back for the planned number of attempts, so that the
//     subscription's confirming flush times out; on a closed connection,
//     which is permanent.
//   - NATS_STREAM_CREATE: natsx.CreateStream of the demo stream (503s, a
//     429); a second stream over the same subjects is a real permanent
//     error.
//   - KV_CREATE, KV_GET, KV_PUT, KV_DELETE: kvx on the demo bucket (timeouts,
//     429s); permanent errors are real where the API has them (a storage
//     type change, Create of an existing key, a stale revision) and a
//     permission violation otherwise.
//   - API_REQUEST: natsx.Request to the demo API responder, which drops
//     the first requests of an operation as planned (timeouts); requests to
//     a service nobody serves (no responders) exhaust; an oversized request
//     is permanent.
//   - EXECUTION_*, APPROVAL_*, REPLAY_*, API_VALIDATION: retry.Do around a
//     request to the demo service responder, which answers with an
//     HTTP-like status: 503 is retried, 429 carries a retry-after hint
//     (retry.RateLimited), 4xx is retry.Permanent.
//
// Faults are injected where a real failure would arise: in the dialer,
// in the jetstream.JetStream and jetstream.KeyValue the library is given,
// in the network connection, and in the responders. Injected errors say
// "demo fault" and wrap the error NATS would return, so natsx and kvx
// classify them as they would the real one.

// Names of the demo's resources.
const (
	demoStream        = "JETRETRY_DEMO_ORDERS"
	demoStreamSubject = "jetretry.demo.orders"
	demoBucket        = "JETRETRY_DEMO"
	// demoRetryAfter is the retry-after hint of rate-limited faults.
	demoRetryAfter = 20 * time.Millisecond
	// demoAPITimeout bounds each API request attempt; a dropped request
	// costs this much.
	demoAPITimeout = 100 * time.Millisecond
	// demoSubscribeTimeout bounds each subscription's confirming flush.
	demoSubscribeTimeout = 50 * time.Millisecond
)

// Headers of the demo's requests.
const (
	hdrOp      = "Jetretry-Demo-Op"
	hdrFault   = "Jetretry-Demo-Fault" // kind/failures
	hdrAttempt = "Jetretry-Demo-Attempt"
	hdrStatus  = "Jetretry-Demo-Status"
	hdrAfter   = "Jetretry-Demo-Retry-After-Ms"
)

// errFaultBase is wrapped by every injected error that does not stand for
// a NATS error.
var errFaultBase = errors.New("demo fault")

// injectedFault wraps err, the error NATS would return, as an injected fault.
func injectedFault(err error) error { return fmt.Errorf("demo fault: %w", err) }

// demoAPIError returns a JetStream API error as the server sends it.
func demoAPIError(status int, code jetstream.ErrorCode, desc string) error {
	return &jetstream.APIError{Code: status, ErrorCode: code, Description: desc}
}

// demoFaultErrs are the errors a fault injects for one operation.
type demoFaultErrs struct {
	transient error // returned by failing attempts of transient and exhaust
	limited   error // marked retry.RateLimited for rate_limited
	permanent error // for permanent, when the operation injects it
}

var (
	errTimeout     = injectedFault(nats.ErrTimeout)
	errUnavailable = injectedFault(demoAPIError(503, 10008, "JetStream system temporarily unavailable"))
	errTooMany     = injectedFault(demoAPIError(429, 10167, "too many requests"))
	errDenied      = injectedFault(fmt.Errorf("%w for subscription on \"$JS.API.DIRECT.GET.KV_%s\"", nats.ErrPermissionViolation, demoBucket))
)

// fault is the plan of one operation, carried in its context to the
// place where it strikes. Which attempt fails is read from the attempt in
// the context (retry.AttemptFrom), so calls the library makes on its own,
// such as the reads that check whether a retried write landed, are not
// counted.
type demoFault struct {
	op     demoOp
	method string // the method it strikes: "PublishMsg", "Get", ...
	errs   demoFaultErrs
}

type faultKey struct{}

func withFault(ctx context.Context, f *demoFault) context.Context {
	return context.WithValue(ctx, faultKey{}, f)
}

// at returns the error attempt n fails with, or nil.
func (f *demoFault) at(n int) error {
	switch f.op.Kind {
	case kindTransient:
		if n <= f.op.Failures {
			return f.errs.transient
		}
	case kindRateLimited:
		if n == 1 {
			return retry.RateLimited(f.errs.limited, demoRetryAfter)
		}
	case kindExhaust:
		return f.errs.transient
	case kindPermanent:
		return f.errs.permanent // nil where the operation fails for real
	}
	return nil
}

// strikeFault returns the error the fault in ctx injects into method, or nil.
func strikeFault(ctx context.Context, method string) error {
	f, _ := ctx.Value(faultKey{}).(*demoFault)
	if f == nil || f.method != method {
		return nil
	}
	a, _ := retry.AttemptFrom(ctx)
	return f.at(a.Number)
}

// faultyJS is a jetstream.JetStream whose publishes, stream and bucket
// creations fail as the fault in their context says.
type faultyJS struct{ jetstream.JetStream }

func (j faultyJS) PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := strikeFault(ctx, "PublishMsg"); err != nil {
		return nil, err
	}
	return j.JetStream.PublishMsg(ctx, msg, opts...)
}

func (j faultyJS) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	if err := strikeFault(ctx, "CreateOrUpdateStream"); err != nil {
		return nil, err
	}
	return j.JetStream.CreateOrUpdateStream(ctx, cfg)
}

func (j faultyJS) CreateOrUpdateKeyValue(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	if err := strikeFault(ctx, "CreateOrUpdateKeyValue"); err != nil {
		return nil, err
	}
	return j.JetStream.CreateOrUpdateKeyValue(ctx, cfg)
}

// faultyKV is a jetstream.KeyValue whose key operations fail as the fault
// in their context says.
type faultyKV struct{ jetstream.KeyValue }

func (k faultyKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if err := strikeFault(ctx, "Get"); err != nil {
		return nil, err
	}
	return k.KeyValue.Get(ctx, key)
}

func (k faultyKV) Put(ctx context.Context, key string, value []byte) (uint64, error) {
	if err := strikeFault(ctx, "Put"); err != nil {
		return 0, err
	}
	return k.KeyValue.Put(ctx, key, value)
}

func (k faultyKV) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if err := strikeFault(ctx, "Create"); err != nil {
		return 0, err
	}
	return k.KeyValue.Create(ctx, key, value, opts...)
}

func (k faultyKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	if err := strikeFault(ctx, "Delete"); err != nil {
		return err
	}
	return k.KeyValue.Delete(ctx, key, opts...)
}

// flakyDialer is a nats.CustomDialer that fails the dials of the first
// attempts as its fault says. A connection attempt dials each server of
// the URL list once (host lookup is skipped) until one answers, so every
// failed attempt takes `servers` dials.
type flakyDialer struct {
	fault   *demoFault
	servers int
	calls   atomic.Int32
	timeout time.Duration
}

// Dial implements nats.CustomDialer.
func (d *flakyDialer) Dial(network, address string) (net.Conn, error) {
	attempt := (int(d.calls.Add(1))-1)/d.servers + 1
	if err := d.fault.at(attempt); err != nil {
		return nil, err
	}
	nd := net.Dialer{Timeout: d.timeout}
	return nd.Dial(network, address)
}

// heldDialer is a nats.CustomDialer whose connection can hold back what
// the server sends (see heldConn).
type heldDialer struct {
	timeout time.Duration
	conn    *heldConn
}

// Dial implements nats.CustomDialer.
func (d *heldDialer) Dial(network, address string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.timeout}
	c, err := nd.Dial(network, address)
	if err != nil {
		return nil, err
	}
	d.conn = &heldConn{Conn: c, open: make(chan struct{}), closed: make(chan struct{})}
	return d.conn, nil
}

// heldConn is a connection that, once held, keeps what it reads from the
// client until the client has sent more than `release` PINGs (a flush
// sends one), or forever when release is negative. It makes the flush
// that confirms a subscription time out for the planned number of
// attempts, as on a congested link, without touching the server.
type heldConn struct {
	net.Conn
	mu       sync.Mutex
	held     bool
	release  int
	pings    int
	open     chan struct{} // closed when released
	closed   chan struct{}
	onceOpen sync.Once
	onceStop sync.Once
}

// hold starts holding reads until more than release PINGs are written.
func (c *heldConn) hold(release int) {
	c.mu.Lock()
	c.held, c.release = true, release
	c.mu.Unlock()
}

func (c *heldConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	held := c.held
	c.mu.Unlock()
	if held {
		select {
		case <-c.open:
		case <-c.closed:
		}
	}
	return n, err
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.held {
		c.pings += strings.Count(string(p), "PING\r\n")
		if c.release >= 0 && c.pings > c.release {
			c.onceOpen.Do(func() { close(c.open) })
		}
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *heldConn) Close() error {
	c.onceStop.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// demoServiceError is the error a demo service call returns for a non-2xx
// status.
type demoServiceError struct {
	Service string
	Status  int
}

func (e *demoServiceError) Error() string {
	return fmt.Sprintf("demo fault: %s service answered %d %s", e.Service, e.Status, demoStatusText(e.Status))
}

// ErrorType names the error in audit events: "demo.ServiceError(503)".
func (e *demoServiceError) ErrorType() string {
	return "demo.ServiceError(" + strconv.Itoa(e.Status) + ")"
}

func demoStatusText(status int) string {
	switch status {
	case 503:
		return "service unavailable"
	case 429:
		return "too many requests"
	case 422:
		return "unprocessable request"
	}
	return ""
}

// demoCall describes how one category of service call is made.
type demoCall struct {
	service, operation string
	// keyed calls always run under an idempotency key (side effects).
	keyed bool
	// notIdempotent calls are marked retry.NotIdempotent: only their key
	// makes a retry safe.
	notIdempotent bool
}

var demoCalls = map[retry.Category]demoCall{
	categories.ExecutionIntent:      {"execution", "submit execution intent", true, true},
	categories.ExecutionContainment: {"execution", "apply containment", false, false},
	categories.ExecutionExpiration:  {"execution", "expire stale intent", false, false},
	categories.ApprovalCheck:        {"approval", "check approval", false, false},
	categories.ApprovalGrant:        {"approval", "grant approval", true, false},
	categories.ReplayProcessing:     {"replay", "process replay batch", false, false},
	categories.ReplayValidation:     {"replay", "validate replay checksum", false, false},
	categories.APIValidation:        {"gateway", "validate api payload", false, false},
}

// demoReply is what the demo services answer.
type demoReply struct {
	Service string `json:"service"`
	Op      string `json:"op"`
	Attempt int    `json:"attempt"`
}

// services runs the demo's operations against one NATS server.
type demoServices struct {
	run, tenant string
	mgr         *retry.Manager
	nc          *nats.Conn
	fjs         faultyJS
	kv          faultyKV
	client      *natsx.Client // publishes, streams, subscriptions
	api         *natsx.Client // API requests, with a short timeout
	connCfg     natsx.ConnectConfig
	servers     int    // URLs in the server list
	prefix      string // "jetretry.demo.<run>": request subjects of this run
	oversized   []byte

	mu      sync.Mutex
	apiSeen map[string]int // API requests received, by operation
	subs    []*nats.Subscription
}

// newDemoServices declares the demo stream and bucket and starts the
// responders. connCfg is how to dial more connections, servers the number
// of URLs in its list.
func newDemoServices(ctx context.Context, run, tenant string, mgr *retry.Manager, nc *nats.Conn, js jetstream.JetStream,
	connCfg natsx.ConnectConfig, servers int) (*demoServices, error) {
	s := &demoServices{
		run: run, tenant: tenant, mgr: mgr, nc: nc, fjs: faultyJS{js},
		connCfg: connCfg, servers: max(servers, 1), prefix: "jetretry.demo." + run,
		apiSeen: make(map[string]int),
	}
	var err error
	if s.client, err = natsx.New(nc, mgr, natsx.WithTimeout(2*time.Second)); err != nil {
		return nil, err
	}
	if s.api, err = natsx.New(nc, mgr, natsx.WithTimeout(demoAPITimeout)); err != nil {
		return nil, err
	}
	opts := s.opts("setup", nil)
	if _, err := s.client.CreateStream(ctx, js, ordersStreamConfig(), opts...); err != nil {
		return nil, fmt.Errorf("create stream %s: %w", demoStream, err)
	}
	kv, err := kvx.CreateBucket(ctx, mgr, js, bucketConfig(), opts...)
	if err != nil {
		return nil, fmt.Errorf("create bucket %s: %w", demoBucket, err)
	}
	s.kv = faultyKV{kv}
	for _, key := range []string{"config.limits", "config.kill-switch", "config.venues"} {
		if _, err := kvx.Put(ctx, mgr, kv, key, []byte(`{"demo":true}`), opts...); err != nil {
			return nil, err
		}
	}
	for subj, h := range map[string]nats.MsgHandler{
		s.prefix + ".svc.*": s.serveService,
		s.prefix + ".api.*": s.serveAPI,
	} {
		sub, err := s.client.Subscribe(ctx, subj, h, opts...)
		if err != nil {
			s.close()
			return nil, err
		}
		s.subs = append(s.subs, sub)
	}
	return s, nil
}

func ordersStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        demoStream,
		Description: "jetretry demo orders",
		Subjects:    []string{demoStreamSubject + ".>"},
		MaxAge:      24 * time.Hour,
		MaxMsgs:     100_000,
		Duplicates:  2 * time.Minute,
	}
}

func bucketConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: demoBucket, Description: "jetretry demo state", History: 5, TTL: 24 * time.Hour}
}

// close stops the responders.
func (s *demoServices) close() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
}

// correlation returns the correlation id of operation seq.
func (s *demoServices) correlation(seq int) string { return s.run + "-" + strconv.Itoa(seq) }

// opts returns the retry options of an operation: the run's tenant, the
// operation's correlation id and its plan, and extra.
func (s *demoServices) opts(corr string, op *demoOp, extra ...retry.Option) []retry.Option {
	ctx := map[string]any{"demo_run": s.run}
	if op != nil {
		ctx["demo_plan"] = op.Kind.String()
	}
	o := []retry.Option{retry.WithTenant(s.tenant), retry.WithCorrelation(corr), retry.WithAdditionalContext(ctx)}
	return append(o, extra...)
}

// key returns the idempotency key of op.
func (s *demoServices) key(op demoOp, operation string) string {
	k, err := idempotency.Key(operation, s.tenant, s.correlation(op.Seq), map[string]any{"seq": op.Seq})
	if err != nil {
		panic(err) // the inputs are plain strings and an int
	}
	return k
}

// submissions is how often op is submitted: twice for a duplicate.
func submissions(op demoOp) int {
	if op.Kind == kindDuplicate {
		return 2
	}
	return 1
}

// do runs op. It returns the operation's error: planned for permanent and
// exhaust, a surprise otherwise.
func (s *demoServices) do(ctx context.Context, op demoOp) error {
	switch op.Category {
	case categories.NATSConnect:
		return s.connect(ctx, op)
	case categories.NATSPublish:
		return s.publish(ctx, op)
	case categories.NATSSubscribe:
		return s.subscribe(ctx, op)
	case categories.NATSStreamCreate:
		return s.createStream(ctx, op)
	case categories.KVCreate:
		return s.createBucket(ctx, op)
	case categories.KVGet:
		return s.kvGet(ctx, op)
	case categories.KVPut:
		return s.kvPut(ctx, op)
	case categories.KVDelete:
		return s.kvDelete(ctx, op)
	case categories.APIRequest:
		return s.apiRequest(ctx, op)
	}
	if call, ok := demoCalls[op.Category]; ok {
		return s.callService(ctx, op, call)
	}
	return fmt.Errorf("demo: no service for category %s", op.Category)
}

// connect dials a fresh connection with natsx.Connect.
func (s *demoServices) connect(ctx context.Context, op demoOp) error {
	f := &demoFault{op: op, errs: demoFaultErrs{
		transient: &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("%w: connection timed out", errFaultBase)},
		limited:   injectedFault(nats.ErrMaxConnectionsExceeded),
		permanent: injectedFault(nats.ErrAuthorization),
	}}
	d := &flakyDialer{fault: f, servers: s.servers, timeout: 2 * time.Second}
	cfg := s.connCfg
	cfg.Name = "jetretry-demo-connector"
	cfg.Options = append(slices.Clone(cfg.Options), nats.SetCustomDialer(d), nats.SkipHostLookup(), nats.NoReconnect())
	nc, err := natsx.Connect(ctx, s.mgr, cfg, s.opts(s.correlation(op.Seq), &op)...)
	if err != nil {
		return err
	}
	nc.Close()
	return nil
}

// publish publishes an order to the demo stream, or, for some successful
// operations, a core notification.
func (s *demoServices) publish(ctx context.Context, op demoOp) error {
	corr := s.correlation(op.Seq)
	subj := demoStreamSubject + "." + s.run + "." + strconv.Itoa(op.Seq)
	data := fmt.Appendf(nil, `{"order":%d,"run":%q}`, op.Seq, s.run)
	if op.Kind == kindOK && op.Seq%2 == 0 {
		return s.client.Publish(ctx, s.prefix+".notify."+strconv.Itoa(op.Seq), data, s.opts(corr, &op)...)
	}
	msg := nats.NewMsg(subj)
	msg.Data = data
	if op.Kind == kindPermanent {
		// A real permanent failure: the stream refuses a message that
		// expects another stream.
		msg.Header.Set(jetstream.ExpectedStreamHeader, "JETRETRY_DEMO_ELSEWHERE")
	}
	ctx = withFault(ctx, &demoFault{op: op, method: "PublishMsg", errs: demoFaultErrs{transient: errTimeout, limited: errTooMany}})
	opts := s.opts(corr, &op)
	if op.Kind == kindDuplicate {
		opts = append(opts, retry.WithIdempotencyKey(s.key(op, "publish order")))
	}
	for range submissions(op) {
		if _, err := s.client.JetStreamPublishMsg(ctx, s.fjs, msg, opts...); err != nil {
			return err
		}
	}
	return nil
}

// subscribe subscribes a fresh subscriber. Transient and exhaust hold
// back the server's replies on its connection; permanent subscribes on a
// connection that is already closed.
func (s *demoServices) subscribe(ctx context.Context, op demoOp) error {
	corr := s.correlation(op.Seq)
	opts := s.opts(corr, &op)
	subj := s.prefix + ".notify." + strconv.Itoa(op.Seq)
	if op.Kind == kindOK {
		got := make(chan struct{}, 1)
		sub, err := s.client.Subscribe(ctx, subj, func(*nats.Msg) {
			select {
			case got <- struct{}{}:
			default:
			}
		}, opts...)
		if err != nil {
			return err
		}
		defer func() { _ = sub.Unsubscribe() }()
		if err := s.client.Publish(ctx, subj, []byte("ping"), opts...); err != nil {
			return err
		}
		select {
		case <-got:
		case <-time.After(time.Second):
		case <-ctx.Done():
		}
		return nil
	}
	d := &heldDialer{timeout: 2 * time.Second}
	cfg := s.connCfg
	cfg.Name = "jetretry-demo-subscriber"
	cfg.Options = append(slices.Clone(cfg.Options), nats.SetCustomDialer(d), nats.SkipHostLookup(), nats.NoReconnect())
	nc, err := natsx.Connect(ctx, s.mgr, cfg, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	client, err := natsx.New(nc, s.mgr, natsx.WithTimeout(demoSubscribeTimeout))
	if err != nil {
		return err
	}
	switch op.Kind {
	case kindPermanent:
		nc.Close()
	case kindTransient:
		d.conn.hold(op.Failures)
	default:
		d.conn.hold(-1)
	}
	sub, err := client.Subscribe(ctx, subj, func(*nats.Msg) {}, opts...)
	if err != nil {
		return err
	}
	return sub.Unsubscribe()
}

// createStream declares the demo stream, as a service does at start; a
// permanent operation declares a second stream over the same subjects.
func (s *demoServices) createStream(ctx context.Context, op demoOp) error {
	cfg := ordersStreamConfig()
	if op.Kind == kindPermanent {
		cfg.Name = demoStream + "_COPY"
	}
	ctx = withFault(ctx, &demoFault{op: op, method: "CreateOrUpdateStream", errs: demoFaultErrs{transient: errUnavailable, limited: errTooMany}})
	_, err := s.client.CreateStream(ctx, s.fjs, cfg, s.opts(s.correlation(op.Seq), &op)...)
	return err
}

// createBucket declares the demo bucket; a permanent operation asks for
// another storage type, which the server refuses.
func (s *demoServices) createBucket(ctx context.Context, op demoOp) error {
	cfg := bucketConfig()
	if op.Kind == kindPermanent {
		cfg.Storage = jetstream.MemoryStorage
	}
	ctx = withFault(ctx, &demoFault{op: op, method: "CreateOrUpdateKeyValue", errs: demoFaultErrs{transient: errUnavailable, limited: errTooMany}})
	_, err := kvx.CreateBucket(ctx, s.mgr, s.fjs, cfg, s.opts(s.correlation(op.Seq), &op)...)
	return err
}

var demoConfigKeys = []string{"config.limits", "config.kill-switch", "config.venues"}

func (s *demoServices) kvGet(ctx context.Context, op demoOp) error {
	ctx = withFault(ctx, &demoFault{op: op, method: "Get", errs: demoFaultErrs{transient: errTimeout, limited: errTooMany, permanent: errDenied}})
	_, err := kvx.Get(ctx, s.mgr, s.kv, demoConfigKeys[op.Seq%len(demoConfigKeys)], s.opts(s.correlation(op.Seq), &op)...)
	return err
}

// kvPut writes the operation's order state; a permanent operation creates
// a key that exists.
func (s *demoServices) kvPut(ctx context.Context, op demoOp) error {
	opts := s.opts(s.correlation(op.Seq), &op)
	if op.Kind == kindPermanent {
		_, err := kvx.Create(ctx, s.mgr, s.kv, demoConfigKeys[op.Seq%len(demoConfigKeys)], []byte(`{}`), opts...)
		return err
	}
	if op.Kind == kindDuplicate {
		opts = append(opts, retry.WithIdempotencyKey(s.key(op, "put order state")))
	}
	ctx = withFault(ctx, &demoFault{op: op, method: "Put", errs: demoFaultErrs{transient: errTimeout, limited: errTooMany}})
	key := "orders." + s.run + "." + strconv.Itoa(op.Seq)
	for range submissions(op) {
		if _, err := kvx.Put(ctx, s.mgr, s.kv, key, []byte(`{"state":"accepted"}`), opts...); err != nil {
			return err
		}
	}
	return nil
}

// kvDelete deletes an order's state; a permanent operation deletes with a
// stale revision.
func (s *demoServices) kvDelete(ctx context.Context, op demoOp) error {
	opts := s.opts(s.correlation(op.Seq), &op)
	key := "orders." + s.run + "." + strconv.Itoa(op.Seq)
	rev, err := s.kv.KeyValue.Put(ctx, key, []byte(`{"state":"done"}`))
	if err != nil {
		return err
	}
	if op.Kind == kindPermanent {
		if _, err := s.kv.KeyValue.Put(ctx, key, []byte(`{"state":"reopened"}`)); err != nil {
			return err
		}
		return kvx.DeleteRevision(ctx, s.mgr, s.kv, key, rev, opts...)
	}
	if op.Kind == kindDuplicate {
		opts = append(opts, retry.WithIdempotencyKey(s.key(op, "delete order state")))
	}
	ctx = withFault(ctx, &demoFault{op: op, method: "Delete", errs: demoFaultErrs{transient: errTimeout, limited: errTooMany}})
	for range submissions(op) {
		if err := kvx.Delete(ctx, s.mgr, s.kv, key, opts...); err != nil {
			return err
		}
	}
	return nil
}

// apiRequest calls the demo API with natsx.Request.
func (s *demoServices) apiRequest(ctx context.Context, op demoOp) error {
	opts := s.opts(s.correlation(op.Seq), &op)
	msg := nats.NewMsg(s.prefix + ".api.quotes")
	msg.Header.Set(hdrOp, s.correlation(op.Seq))
	msg.Data = []byte(`{"symbol":"DEMO"}`)
	switch op.Kind {
	case kindTransient:
		msg.Header.Set(hdrFault, kindTransient.String()+"/"+strconv.Itoa(op.Failures))
	case kindExhaust:
		msg.Subject = s.prefix + ".down.quotes" // nobody serves it
	case kindPermanent:
		msg.Data = s.oversizedPayload()
	}
	defer s.forget(s.correlation(op.Seq))
	_, err := s.api.RequestMsg(ctx, msg, opts...)
	return err
}

// oversizedPayload returns a payload over the server's max payload.
func (s *demoServices) oversizedPayload() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oversized == nil {
		s.oversized = make([]byte, s.nc.MaxPayload()+1)
	}
	return s.oversized
}

func (s *demoServices) forget(op string) {
	s.mu.Lock()
	delete(s.apiSeen, op)
	s.mu.Unlock()
}

// serveAPI answers API requests, dropping the first ones of an operation
// whose fault says so.
func (s *demoServices) serveAPI(m *nats.Msg) {
	op := m.Header.Get(hdrOp)
	s.mu.Lock()
	s.apiSeen[op]++
	n := s.apiSeen[op]
	s.mu.Unlock()
	if kind, failures, ok := strings.Cut(m.Header.Get(hdrFault), "/"); ok && kind == kindTransient.String() {
		if f, _ := strconv.Atoi(failures); n <= f {
			return // dropped: the caller times out
		}
	}
	_ = m.Respond([]byte(`{"symbol":"DEMO","price":100}`))
}

// callService calls a demo service under retry.Do: the service answers
// with a status, which the call maps to a retry decision.
func (s *demoServices) callService(ctx context.Context, op demoOp, call demoCall) error {
	opts := s.opts(s.correlation(op.Seq), &op)
	if call.keyed || op.Kind == kindDuplicate {
		opts = append(opts, retry.WithIdempotencyKey(s.key(op, call.operation)))
	}
	if call.notIdempotent {
		opts = append(opts, retry.NotIdempotent())
	}
	subj := s.prefix + ".svc." + call.service
	fn := func(actx context.Context) (demoReply, error) {
		a, _ := retry.AttemptFrom(actx)
		msg := nats.NewMsg(subj)
		msg.Header.Set(hdrOp, s.correlation(op.Seq))
		msg.Header.Set(hdrFault, op.Kind.String()+"/"+strconv.Itoa(op.Failures))
		msg.Header.Set(hdrAttempt, strconv.Itoa(a.Number))
		msg.Data = []byte(call.operation)
		rctx, cancel := context.WithTimeout(actx, 2*time.Second)
		defer cancel()
		m, err := s.nc.RequestMsgWithContext(rctx, msg)
		if err != nil {
			return demoReply{}, err
		}
		status, _ := strconv.Atoi(m.Header.Get(hdrStatus))
		serr := &demoServiceError{Service: call.service, Status: status}
		switch {
		case status == 429:
			ms, _ := strconv.Atoi(m.Header.Get(hdrAfter))
			return demoReply{}, retry.RateLimited(serr, time.Duration(ms)*time.Millisecond)
		case status >= 500:
			return demoReply{}, serr
		case status >= 400:
			return demoReply{}, retry.Permanent(serr)
		}
		var r demoReply
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return demoReply{}, retry.Permanent(fmt.Errorf("demo: %s service: bad reply: %w", call.service, err))
		}
		return r, nil
	}
	for range submissions(op) {
		if _, err := retry.Do(ctx, s.mgr, op.Category, call.operation, fn, opts...); err != nil {
			return err
		}
	}
	return nil
}

// serveService answers a service call with the status its fault and
// attempt number call for.
func (s *demoServices) serveService(m *nats.Msg) {
	kind, failures, _ := strings.Cut(m.Header.Get(hdrFault), "/")
	f, _ := strconv.Atoi(failures)
	attempt, _ := strconv.Atoi(m.Header.Get(hdrAttempt))
	status := 200
	switch kind {
	case kindTransient.String():
		if attempt <= f {
			status = 503
		}
	case kindRateLimited.String():
		if attempt == 1 {
			status = 429
		}
	case kindPermanent.String():
		status = 422
	case kindExhaust.String():
		status = 503
	}
	reply := nats.NewMsg(m.Reply)
	reply.Header.Set(hdrStatus, strconv.Itoa(status))
	if status == 429 {
		reply.Header.Set(hdrAfter, strconv.FormatInt(demoRetryAfter.Milliseconds(), 10))
	}
	if status == 200 {
		service := strings.TrimPrefix(m.Subject, s.prefix+".svc.")
		reply.Data, _ = json.Marshal(demoReply{Service: service, Op: m.Header.Get(hdrOp), Attempt: attempt})
	}
	_ = m.RespondMsg(reply)
}
