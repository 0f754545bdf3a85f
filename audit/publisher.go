package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var _ Emitter = (*Publisher)(nil)

// Errors of the Publisher.
var (
	// ErrClosed is returned by Emit, Flush and Close once Close was
	// called.
	ErrClosed = errors.New("audit: publisher closed")
	// ErrSpool is matched by the errors of a spool that cannot be written:
	// Emit returns it when the buffer is full and the event cannot be
	// spooled either (the event is then not accepted), and Close when it
	// could not persist the events it still held.
	ErrSpool = errors.New("audit: spool write failed")
	// ErrSpoolInUse is returned by NewPublisher when another publisher,
	// in this process or another, holds the spool directory.
	ErrSpoolInUse = errors.New("audit: spool directory in use")
	// ErrEventTooLarge is returned by Emit for an event whose JSON is
	// longer than PublisherConfig.MaxEventBytes.
	ErrEventTooLarge = errors.New("audit: event too large")
)

// Defaults of PublisherConfig.
const (
	DefaultBufferSize    = 4096
	DefaultMaxPending    = 4000
	DefaultAckTimeout    = 5 * time.Second
	DefaultRetryWait     = 100 * time.Millisecond
	DefaultMaxRetryWait  = 2 * time.Second
	DefaultSegmentBytes  = 1 << 20
	DefaultSyncInterval  = 100 * time.Millisecond
	DefaultMaxEventBytes = 64 << 10
	DefaultFullWait      = 200 * time.Millisecond
	DefaultSource        = "jetretry"
)

// PublisherConfig configures a Publisher. It is a plain struct: zero fields
// take the defaults given on each, except SpoolDir, which is required.
type PublisherConfig struct {
	// SpoolDir is the directory of the local spool: the events that could
	// not be published, as JSON lines in segment files. Required: it must
	// be private to one publisher (NewPublisher locks it) and the same
	// across restarts, so that a new process replays what an earlier one
	// left, for example a directory under os.UserCacheDir named after the
	// service. It is created if missing.
	//
	// Its format is stable: segment files named by a 20-digit number,
	// replayed in number order (new spools start at 00000000004294967296),
	// each holding JSON lines, one event per line exactly as published;
	// a file named LOCK; and "*.jsonl.bad" files, replayed segments that
	// held unreadable lines, kept for inspection.
	SpoolDir string

	// SubjectPrefix is the subject prefix events are published under; it
	// must match the stream's StreamConfig.SubjectPrefix. Default
	// "jetretry.audit".
	SubjectPrefix string

	// BufferSize is how many events wait in memory for publishing. When
	// it is full, Emit writes to the spool instead. Default 4096.
	BufferSize int

	// MaxPending bounds the publishes awaiting an ack. Default 4000, as
	// nats.go bounds async publishes (measured: 512 -> 4000 takes the
	// publisher from about 0.64x to 0.86x of raw PublishAsync throughput).
	MaxPending int

	// FullWait is how long Emit waits for room when the buffer is full
	// while the publisher is live (connected, nothing spooled), before it
	// writes the event to the spool instead. A short wait turns a burst
	// into backpressure at the stream's pace rather than a detour through
	// the disk. Default 200ms, the stall wait nats.go itself gives an async
	// publish at its pending limit; negative means never wait.
	FullWait time.Duration

	// AckTimeout is how long a publish may wait for its ack before it is
	// treated as failed, and the event spooled for a later re-publish.
	// Default 5s.
	AckTimeout time.Duration

	// RetryWait is the first wait before publishing again after a
	// failure; it doubles after each failed try up to MaxRetryWait.
	// Defaults 100ms and 2s.
	RetryWait    time.Duration
	MaxRetryWait time.Duration

	// SegmentBytes is the size at which a spool segment is closed and a
	// new one started. A segment is deleted once all its events are
	// acked, and replay holds one segment in memory. Default 1 MiB.
	SegmentBytes int64

	// SyncInterval is how often events appended to the spool are fsynced.
	// A spooled event survives a crash of the process at once, and a
	// crash of the machine after at most this long. Default 100ms.
	SyncInterval time.Duration

	// MaxEventBytes bounds the JSON size of one event; Emit refuses larger
	// ones with ErrEventTooLarge, so that no event can block the stream's
	// max payload. Default 64 KiB.
	MaxEventBytes int

	// CloudEvents adds CloudEvents 1.0 binary-mode headers to every
	// message: ce-specversion "1.0", ce-id (the event_id), ce-source
	// (Source), ce-type ("io.jetretry.<event_type>"), ce-time (the event
	// timestamp, RFC 3339), ce-subject (the retry_category) and
	// Content-Type "application/json". Default false.
	CloudEvents bool

	// Source is the CloudEvents source attribute. Default "jetretry".
	Source string

	// Logger receives warnings about failed publishes and spool errors.
	// Default slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns c with the defaults filled in for its zero fields.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.RetryWait == 0 {
		c.RetryWait = DefaultRetryWait
	}
	if c.MaxRetryWait == 0 {
		c.MaxRetryWait = max(DefaultMaxRetryWait, c.RetryWait)
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SyncInterval == 0 {
		c.SyncInterval = DefaultSyncInterval
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = DefaultMaxEventBytes
	}
	if c.FullWait == 0 {
		c.FullWait = DefaultFullWait
	}
	if c.Source == "" {
		c.Source = DefaultSource
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks c after applying WithDefaults. It returns nil or an error
// that matches ErrInvalidConfig.
func (c PublisherConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.SpoolDir == "":
		return invalidConfig("spool dir is required")
	case c.BufferSize < 1:
		return invalidConfig("buffer size %d is not positive", c.BufferSize)
	case c.MaxPending < 1:
		return invalidConfig("max pending %d is not positive", c.MaxPending)
	case c.AckTimeout <= 0:
		return invalidConfig("ack timeout %v is not positive", c.AckTimeout)
	case c.RetryWait <= 0 || c.MaxRetryWait < c.RetryWait:
		return invalidConfig("retry waits %v..%v are not positive and ordered", c.RetryWait, c.MaxRetryWait)
	case c.SegmentBytes < 1:
		return invalidConfig("segment bytes %d is not positive", c.SegmentBytes)
	case c.SyncInterval <= 0:
		return invalidConfig("sync interval %v is not positive", c.SyncInterval)
	case c.MaxEventBytes < 1:
		return invalidConfig("max event bytes %d is not positive", c.MaxEventBytes)
	}
	return validatePrefix(c.SubjectPrefix)
}

// PublisherStats are a Publisher's counters since it was created.
type PublisherStats struct {
	// Accepted counts the events Emit accepted.
	Accepted uint64
	// Published counts the events the stream acked, Replayed included.
	Published uint64
	// Spooled counts the events written to the spool: by Emit when the
	// buffer was full or the spool not yet drained, and by the publisher
	// after a failed or timed-out publish, or at Close.
	Spooled uint64
	// Replayed counts the events from the spool that the stream acked,
	// including events left by an earlier process.
	Replayed uint64
	// Unreadable counts spool lines that did not decode (lines torn by a
	// crash). They are kept in a segment file renamed to "*.jsonl.bad".
	Unreadable uint64
	// Pending is the number of events held and not yet acked: buffered,
	// in flight, or in the spool (an earlier process's included).
	Pending int64
}

// Publisher is an Emitter that appends events to the JetStream audit
// stream, asynchronously and without losing any.
//
// Emit validates an event, encodes it and queues it in a bounded memory
// buffer, then returns; a background goroutine publishes the buffer with
// PublishMsgAsync, at most MaxPending at a time, with the event_id as the
// Nats-Msg-Id header so that the stream stores each event once.
//
// Nothing accepted is dropped. When the buffer is full, or a publish fails
// or its ack does not come within AckTimeout (NATS down, no stream), the
// events go to a local spool directory instead: JSON-lines segment files,
// fsynced every SyncInterval. Once anything is spooled, every later event
// is spooled too, until the spool is drained, so the spool stays one FIFO:
// the publisher replays it oldest segment first, retrying with backoff
// until NATS answers, and deletes a segment only when the stream has acked
// every event in it. A new Publisher on the same SpoolDir first replays
// what an earlier process left.
//
// Order: events are published in the order Emit accepted them, except that
// an event whose publish failed is re-published after those that were in
// flight with it (at most MaxPending) and succeeded.
//
// Duplicates: an event whose outcome was uncertain (a timed-out ack, a
// crash before a segment was deleted) is published again with the same
// Nats-Msg-Id, and the stream discards the copy if the first was stored
// within its Duplicates window. An outage longer than that window can thus
// store such an event twice; it never loses one.
//
// Events still in memory are lost if the process crashes; Close writes
// them to the spool. Call Close to stop the background goroutine.
//
// A Publisher is safe for concurrent use.
type Publisher struct {
	cfg PublisherConfig
	js  jetstream.JetStream // publishes; private to the publisher when own
	nc  *nats.Conn          // nil when js has no connection
	own bool

	mu      sync.Mutex
	closed  bool
	seq     uint64 // accept sequence of the newest accepted event
	buf     queue  // accepted events in memory, all older than the spool's
	spool   *spool
	idle    bool          // the run loop waits for an Emit
	room    chan struct{} // closed when the buffer shrinks; nil when nobody waits
	waiters []*flushWaiter

	nwait   atomic.Int32
	wake    chan struct{} // cap 1: work arrived or a Flush waits
	quit    chan struct{} // closed by Close to stop the run loop
	done    chan struct{} // closed when the run loop has exited
	exitErr error         // set by the run loop before done is closed

	accepted, published, spooled, replayed, unreadable atomic.Uint64
	pending                                            atomic.Int64
}

// entry is one accepted event, encoded.
type entry struct {
	seq  uint64 // accept sequence; 0 for events read back from the spool
	data []byte // the event JSON, exactly as published and spooled
	id   string
	typ  Type
	cat  string
	ts   time.Time
}

type flushWaiter struct {
	target uint64
	ch     chan struct{}
}

// NewPublisher returns a Publisher that publishes through js's connection
// and starts its background goroutine. The events of a spool left in
// cfg.SpoolDir by an earlier process are replayed first.
//
// When js has a connection (js.Conn() is not nil), the Publisher publishes
// through its own JetStream context on that connection, with
// cfg.AckTimeout as its async publish timeout, so that its pending acks
// neither count against nor interfere with the caller's async publishes.
// The stream itself is not created: call EnsureStream.
//
// It returns an error matching ErrInvalidConfig for a bad cfg or a nil js,
// ErrSpoolInUse when the spool directory is locked by another publisher,
// or the file system error met while opening the spool.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if js == nil {
		return nil, invalidConfig("nil JetStream")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	p := &Publisher{
		cfg:  cfg,
		js:   js,
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	if nc := js.Conn(); nc != nil {
		own, err := jetstream.New(nc,
			jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
			jetstream.WithPublishAsyncMaxPending(2*cfg.MaxPending))
		if err != nil {
			return nil, fmt.Errorf("audit: publisher: %w", err)
		}
		p.js, p.nc, p.own = own, nc, true
	}
	sp, lines, err := openSpool(cfg.SpoolDir, cfg.SegmentBytes)
	if err != nil {
		return nil, fmt.Errorf("audit: publisher: open spool %s: %w", cfg.SpoolDir, err)
	}
	p.spool = sp
	p.pending.Store(lines)
	go p.run()
	return p, nil
}

// Emit accepts e for publishing and returns without waiting for its ack. It
// validates e (see Event.Validate), truncates its exception messages with
// TruncateMessage, and encodes it; later changes to e's AdditionalContext
// do not show. The event is queued in memory, or appended to the spool
// when the spool is not yet drained or the buffer stays full. While the
// publisher is live and the buffer is full, Emit first waits up to
// FullWait (or until ctx ends) for room, so that bursts meet backpressure
// at the stream's pace; it never waits longer on the network.
//
// It returns a *ValidationError (matching ErrInvalidEvent), an error
// matching ErrEventTooLarge, ErrClosed after Close, ctx's error if it
// ended while Emit waited for room, or an error matching ErrSpool when the
// event had to be spooled and the write failed. In each case the event is
// not accepted; otherwise it will be published.
func (p *Publisher) Emit(ctx context.Context, e Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	e.ExceptionMessage = TruncateMessage(e.ExceptionMessage)
	e.FinalExceptionMessage = TruncateMessage(e.FinalExceptionMessage)
	data := e.AppendJSON(make([]byte, 0, 512))
	if len(data) > p.cfg.MaxEventBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrEventTooLarge, len(data), p.cfg.MaxEventBytes)
	}
	en := entry{data: data, id: e.EventID, typ: e.Type, cat: e.Category, ts: e.Timestamp}

	p.mu.Lock()
	if err := p.waitRoomLocked(ctx); err != nil {
		p.mu.Unlock()
		return err
	}
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	en.seq = p.seq + 1
	if p.spool.empty() && p.buf.len() < p.cfg.BufferSize {
		p.buf.push(en)
	} else {
		if err := p.spool.append(append(en.data, '\n'), en.seq); err != nil {
			p.mu.Unlock()
			return fmt.Errorf("%w: %w", ErrSpool, err)
		}
		p.spooled.Add(1)
	}
	p.seq = en.seq
	wake := p.idle
	p.idle = false
	p.mu.Unlock()

	p.accepted.Add(1)
	p.pending.Add(1)
	if wake {
		p.signal()
	}
	return nil
}

// Flush waits until the stream has acked every event accepted before the
// call, events replayed from an earlier process's spool included. It
// returns nil then, ErrClosed if the Publisher is or gets closed, or, when
// ctx ends first, an error wrapping ctx.Err(); the events stay queued or
// spooled and will still be published.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	w := p.addWaiterLocked()
	p.mu.Unlock()
	p.signal()
	select {
	case <-w.ch:
		return nil
	case <-p.done:
		return ErrClosed
	case <-ctx.Done():
		p.removeWaiter(w)
		return fmt.Errorf("audit: publisher: flush: %w", ctx.Err())
	}
}

// Close stops the Publisher. It refuses new events at once, waits as Flush
// does until every accepted event is acked or ctx ends, then stops the
// background goroutine, writing every event not yet acked (buffered or in
// flight) to the spool, which a later Publisher on the same SpoolDir
// replays.
//
// It returns nil when everything was acked; an error wrapping ctx.Err()
// that gives the number of events left in the spool when ctx ended first;
// an error matching ErrSpool if some events could not be written to the
// spool (they are lost, and logged); ErrClosed when called again.
func (p *Publisher) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.closed = true
	p.roomLocked()
	w := p.addWaiterLocked()
	p.mu.Unlock()
	p.signal()

	var err error
	select {
	case <-w.ch:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(p.quit)
	<-p.done
	if p.exitErr != nil {
		return p.exitErr
	}
	if err != nil {
		return fmt.Errorf("audit: publisher: close: %d events left in the spool: %w", p.pending.Load(), err)
	}
	return nil
}

// Stats returns the Publisher's counters. It is cheap and safe to call at
// any time, also after Close.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Accepted:   p.accepted.Load(),
		Published:  p.published.Load(),
		Spooled:    p.spooled.Load(),
		Replayed:   p.replayed.Load(),
		Unreadable: p.unreadable.Load(),
		Pending:    p.pending.Load(),
	}
}

// waitRoomLocked waits, for at most FullWait, while the buffer is full but
// the publisher is live, so that a burst meets backpressure instead of
// the spool. It returns with p.mu held; only ctx's end is an error.
func (p *Publisher) waitRoomLocked(ctx context.Context) error {
	if p.cfg.FullWait <= 0 {
		return nil
	}
	var t *time.Timer
	for !p.closed && p.spool.empty() && p.buf.len() >= p.cfg.BufferSize && (p.nc == nil || p.nc.IsConnected()) {
		if t == nil {
			t = time.NewTimer(p.cfg.FullWait)
			defer t.Stop()
		}
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.mu.Unlock()
		select {
		case <-room:
			p.mu.Lock()
		case <-t.C:
			p.mu.Lock()
			return nil
		case <-ctx.Done():
			p.mu.Lock()
			return ctx.Err()
		}
	}
	return nil
}

// roomLocked wakes Emits waiting for room in the buffer. p.mu is held.
func (p *Publisher) roomLocked() {
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
}

func (p *Publisher) addWaiterLocked() *flushWaiter {
	w := &flushWaiter{target: p.seq, ch: make(chan struct{})}
	p.waiters = append(p.waiters, w)
	p.nwait.Add(1)
	return w
}

func (p *Publisher) removeWaiter(w *flushWaiter) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.waiters {
		if x == w {
			p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
			p.nwait.Add(-1)
			return
		}
	}
}

// signal wakes the run loop.
func (p *Publisher) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// msg returns the message for en.
func (p *Publisher) msg(en *entry) *nats.Msg {
	id := headerValue(en.id)
	h := nats.Header{jetstream.MsgIDHeader: []string{id}}
	if p.cfg.CloudEvents {
		h["ce-specversion"] = []string{"1.0"}
		h["ce-id"] = []string{id}
		h["ce-source"] = []string{headerValue(p.cfg.Source)}
		h["ce-type"] = []string{"io.jetretry." + headerValue(string(en.typ))}
		h["ce-time"] = []string{en.ts.UTC().Format(time.RFC3339Nano)}
		h["ce-subject"] = []string{headerValue(en.cat)}
		h["Content-Type"] = []string{"application/json"}
	}
	return &nats.Msg{Subject: subject(p.cfg.SubjectPrefix, en.typ, en.cat), Data: en.data, Header: h}
}

// headerValue replaces control characters, which could end a header line,
// with '_'.
func headerValue(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] < 0x20 || b[j] == 0x7f {
					b[j] = '_'
				}
			}
			return string(b)
		}
	}
	return s
}

// queue is a FIFO of entries: a ring buffer that doubles when full.
type queue struct {
	items []entry // len is the capacity; a power of two once grown
	head  int     // index of the oldest entry
	n     int     // entries queued
}

func (q *queue) len() int { return q.n }

func (q *queue) at(i int) *entry { return &q.items[(q.head+i)&(len(q.items)-1)] }

func (q *queue) push(e entry) {
	if q.n == len(q.items) {
		grown := make([]entry, max(64, 2*len(q.items)))
		q.copyTo(grown)
		q.items, q.head = grown, 0
	}
	*q.at(q.n) = e
	q.n++
}

// copyTo copies the entries, oldest first, to dst, which must be long
// enough.
func (q *queue) copyTo(dst []entry) {
	if q.n == 0 {
		return
	}
	end := q.head + q.n
	if end <= len(q.items) {
		copy(dst, q.items[q.head:end])
		return
	}
	k := copy(dst, q.items[q.head:])
	copy(dst[k:], q.items[:end-len(q.items)])
}

// take moves up to n entries, oldest first, to dst.
func (q *queue) take(n int, dst []entry) []entry {
	k := min(n, q.n)
	for i := range k {
		e := q.at(i)
		dst = append(dst, *e)
		*e = entry{}
	}
	q.head = (q.head + k) & (len(q.items) - 1)
	q.n -= k
	return dst
}

// drain removes and returns every entry.
func (q *queue) drain() []entry {
	out := make([]entry, q.n)
	q.copyTo(out)
	clear(q.items)
	q.head, q.n = 0, 0
	return out
}

// prepend puts es, which are older than every queued entry, at the front.
func (q *queue) prepend(es []entry) {
	items := make([]entry, max(64, 1<<bits.Len(uint(len(es)+q.n))))
	k := copy(items, es)
	q.copyTo(items[k:])
	q.items, q.head, q.n = items, 0, k+q.n
}

// minSeq returns the oldest entry's accept sequence, or MaxUint64.
func (q *queue) minSeq() uint64 {
	if q.n == 0 {
		return math.MaxUint64
	}
	return q.at(0).seq
}
