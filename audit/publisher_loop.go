package audit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// errAckTimeout reports a publish whose ack did not come in time.
var errAckTimeout = errors.New("no ack in time")

// errDisconnected reports a replay not tried because NATS is not connected.
var errDisconnected = errors.New("not connected")

// The run loop alternates between two phases. In the live phase it
// publishes the memory buffer. When a publish fails it stops taking from
// the buffer, lets what is in flight settle, and spills the failed events
// and the whole buffer, in accept order, into a new segment at the head of
// the spool. From then on (and whenever Emit found the buffer full) the
// spool is not empty, Emit appends to it, and once the buffer is drained
// the loop switches to the replay phase: it publishes the spool segment by
// segment, oldest first, retrying a segment's unacked events with backoff
// until all are acked, then deletes it. When the last segment is done, the
// switch back to the live phase happens under Publisher.mu, atomically with
// Emit's choice between buffer and spool, so the two never interleave out
// of order.
type phase int

const (
	phaseLive phase = iota
	phaseReplay
	phaseQuit
)

// flight is one publish awaiting its ack.
type flight struct {
	e        entry
	paf      jetstream.PubAckFuture
	deadline time.Time
	idx      int // index in the replayed segment; -1 for a live entry
}

// loop is the state of the run loop goroutine.
type loop struct {
	p        *Publisher
	inflight []flight // oldest first
	failed   []entry  // live entries whose publish failed, not yet spilled
	batch    []entry
	timer    *time.Timer
	backoff  time.Duration // next wait before retrying; 0 after a success
}

func (p *Publisher) run() {
	l := &loop{
		p:     p,
		timer: time.NewTimer(time.Hour),
	}
	defer close(p.done)
	defer l.timer.Stop()
	syncDone := make(chan struct{})
	go p.syncer(syncDone)
	// Start live even with a spool left by an earlier process: Emit may
	// already have buffered events, older than those it spooled, and
	// live drains them before it switches to replay.
	ph := phaseLive
	for ph != phaseQuit {
		if ph == phaseLive {
			ph = l.live()
		} else {
			ph = l.replay()
		}
	}
	<-syncDone // the syncer saw quit too
	l.shutdown()
}

// syncer fsyncs the spool every SyncInterval, off the run loop, so that
// disk latency never stalls publishing. It returns, closing done, when
// quit is closed.
func (p *Publisher) syncer(done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(p.cfg.SyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-p.quit:
			return
		}
		p.mu.Lock()
		w := p.spool.takeSyncWork()
		p.mu.Unlock()
		if err := w.do(p.spool.dir); err != nil {
			p.cfg.Logger.Error("audit: publisher: spool fsync failed", "spool_dir", p.spool.dir, "error", err)
		}
	}
}

// live publishes the buffer until the spool must be replayed or Close
// stops the loop.
func (l *loop) live() phase {
	p := l.p
	failing := false
	for {
		if !failing && len(l.failed) == 0 {
			if err := l.launchLive(); err != nil {
				failing = true
				l.warn("publish failed, spooling", err)
			}
		}
		if len(l.inflight) == 0 {
			if failing {
				if !l.spill() {
					// The spool cannot be written: the events went back to
					// the buffer; try publishing them again later.
					if !l.sleep() {
						return phaseQuit
					}
					failing = false
					continue
				}
				return phaseReplay
			}
			p.mu.Lock()
			if p.buf.len() > 0 {
				p.mu.Unlock()
				continue
			}
			if !p.spool.empty() {
				p.mu.Unlock()
				return phaseReplay
			}
			p.idle = true
			p.mu.Unlock()
			l.progress()
			select {
			case <-p.wake:
				l.progress()
			case <-p.quit:
				return phaseQuit
			}
			continue
		}
		switch ev, err := l.awaitHead(); ev {
		case evAck:
			l.pop()
			p.published.Add(1)
			p.pending.Add(-1)
			l.progressIfWaited()
		case evFail:
			f := l.pop()
			l.failed = append(l.failed, f.e)
			if !failing {
				failing = true
				l.warn("publish failed, spooling", err)
			}
		case evQuit:
			return phaseQuit
		}
	}
}

// launchLive publishes buffered entries while fewer than MaxPending are in
// flight. On a publish error the entry and those taken with it go to
// l.failed and the error is returned.
func (l *loop) launchLive() error {
	p := l.p
	room := p.cfg.MaxPending - len(l.inflight)
	if room <= 0 {
		return nil
	}
	if !l.connected() {
		// Publishing now would only fill the connection's reconnect
		// buffer, which is flushed after a reconnect, ahead of the
		// replay, and out of order: spool instead.
		p.mu.Lock()
		n := p.buf.len()
		p.mu.Unlock()
		if n > 0 {
			return errDisconnected
		}
		return nil
	}
	p.mu.Lock()
	l.batch = p.buf.take(room, l.batch[:0])
	p.roomLocked()
	p.mu.Unlock()
	for i := range l.batch {
		paf, err := p.js.PublishMsgAsync(p.msg(&l.batch[i]))
		if err != nil {
			l.failed = append(l.failed, l.batch[i:]...)
			clear(l.batch)
			return err
		}
		l.inflight = append(l.inflight, flight{e: l.batch[i], paf: paf, deadline: l.deadline(), idx: -1})
	}
	clear(l.batch)
	return nil
}

// spill writes the failed entries and the whole buffer, in accept order,
// as a new head segment. It reports whether that worked; if not, the
// entries are back at the front of the buffer.
func (l *loop) spill() bool {
	p := l.p
	es := l.failed
	l.failed = nil
	slices.SortFunc(es, func(a, b entry) int { return cmpUint(a.seq, b.seq) })
	p.mu.Lock()
	es = append(es, p.buf.drain()...)
	p.roomLocked()
	if len(es) == 0 {
		p.mu.Unlock()
		return true
	}
	seg, err := p.spool.reserveHead(len(es), es[0].seq)
	p.mu.Unlock()
	if err == nil {
		err = writeSegmentFile(p.spool.path(seg.num), joinLines(es))
		if err == nil {
			err = syncDir(p.spool.dir)
		}
	}
	if err != nil {
		p.mu.Lock()
		if seg != nil {
			p.spool.remove(seg)
		}
		p.buf.prepend(es)
		p.mu.Unlock()
		p.cfg.Logger.Error("audit: publisher: cannot spool, keeping events in memory",
			"events", len(es), "spool_dir", p.spool.dir, "error", err)
		l.grow()
		return false
	}
	p.spooled.Add(uint64(len(es)))
	l.grow()
	return true
}

// replay publishes the spool, oldest segment first, until it is empty
// (phaseLive) or Close stops the loop (phaseQuit).
func (l *loop) replay() phase {
	p := l.p
	for {
		p.mu.Lock()
		if len(p.spool.closed) == 0 {
			if p.spool.empty() {
				// Back to the buffer, atomically with Emit's choice.
				p.spool.rotate() // drops an active segment with nothing written
				p.mu.Unlock()
				l.progress()
				return phaseLive
			}
			p.spool.rotate()
		}
		seg := p.spool.closed[0]
		f := seg.f
		seg.f = nil // seg.dirty stays: the syncer fsyncs it by path
		p.mu.Unlock()
		if f != nil {
			_ = f.Close()
		}

		path := p.spool.path(seg.num)
		entries, bad, err := readSegment(path)
		if err != nil {
			p.cfg.Logger.Error("audit: publisher: cannot read spool segment", "path", path, "error", err)
			l.grow()
			if !l.sleep() {
				return phaseQuit
			}
			continue
		}
		acked := make([]bool, len(entries))
		for {
			if l.backoff > 0 && !l.sleep() {
				return phaseQuit
			}
			ok, quit := l.replayPass(entries, acked)
			if quit {
				return phaseQuit
			}
			if ok {
				l.backoff = 0
				break
			}
			l.grow()
		}

		if bad > 0 {
			p.unreadable.Add(uint64(bad))
			if seg.loaded {
				// Counted as pending at start; lines torn in this process
				// were never accepted.
				p.pending.Add(-int64(bad))
			}
			err = os.Rename(path, path+badExt)
			p.cfg.Logger.Error("audit: publisher: unreadable lines in spool segment, kept",
				"path", path+badExt, "lines", bad, "error", err)
		} else {
			err = os.Remove(path)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			p.cfg.Logger.Warn("audit: publisher: cannot remove replayed spool segment; the next publisher on this spool will replay it (deduplicated within the window)",
				"path", path, "error", err)
		}
		p.mu.Lock()
		p.spool.remove(seg)
		p.spool.dirDirty = true
		p.mu.Unlock()
		l.progress()
	}
}

// replayPass publishes the entries not yet acked, at most MaxPending at a
// time. It reports ok when all are acked; after a failure it stops
// launching, lets what is in flight settle, and returns ok false.
func (l *loop) replayPass(entries []entry, acked []bool) (ok, quit bool) {
	p := l.p
	if !l.connected() {
		return false, false
	}
	next, failing := 0, false
	for {
		for !failing && len(l.inflight) < p.cfg.MaxPending && next < len(entries) {
			if acked[next] {
				next++
				continue
			}
			if !l.connected() {
				failing = true
				break
			}
			paf, err := p.js.PublishMsgAsync(p.msg(&entries[next]))
			if err != nil {
				failing = true
				l.warn("replay failed", err)
				break
			}
			l.inflight = append(l.inflight, flight{e: entries[next], paf: paf, deadline: l.deadline(), idx: next})
			next++
		}
		if len(l.inflight) == 0 {
			return !failing && next == len(entries), false
		}
		switch ev, err := l.awaitHead(); ev {
		case evAck:
			f := l.pop()
			acked[f.idx] = true
			p.published.Add(1)
			p.replayed.Add(1)
			p.pending.Add(-1)
		case evFail:
			l.pop()
			if !failing {
				failing = true
				l.warn("replay failed", err)
			}
		case evQuit:
			return false, true
		}
	}
}

type event int

const (
	evAck event = iota
	evFail
	evOther
	evQuit
)

// awaitHead waits for the oldest publish in flight to settle, for its
// deadline, or for something else to do. On evFail it returns the cause.
func (l *loop) awaitHead() (event, error) {
	p := l.p
	f := &l.inflight[0]
	// Fast path: under load the oldest ack has usually arrived.
	select {
	case <-f.paf.Ok():
		return evAck, nil
	default:
	}
	l.timer.Reset(time.Until(f.deadline))
	select {
	case <-f.paf.Ok():
		return evAck, nil
	case err := <-f.paf.Err():
		return evFail, err
	case <-l.timer.C:
		return evFail, errAckTimeout
	case <-p.wake:
		l.progress()
	case <-p.quit:
		return evQuit, nil
	}
	return evOther, nil
}

func (l *loop) pop() flight {
	f := l.inflight[0]
	l.inflight[0] = flight{}
	l.inflight = l.inflight[1:]
	if len(l.inflight) == 0 {
		l.inflight = l.inflight[:0:0]
	}
	return f
}

// connected reports whether the connection is up (true without one).
func (l *loop) connected() bool {
	return l.p.nc == nil || l.p.nc.IsConnected()
}

// deadline is when a publish made now is treated as failed. The private
// JetStream context times the ack out after AckTimeout; this backstop
// covers a JetStream without a connection of its own.
func (l *loop) deadline() time.Time {
	return time.Now().Add(2 * l.p.cfg.AckTimeout)
}

// sleep waits for the current backoff. A Flush cuts it short. It returns false when Close stops the loop.
func (l *loop) sleep() bool {
	p := l.p
	t := time.NewTimer(l.backoff)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return true
		case <-p.wake:
			if p.nwait.Load() > 0 {
				l.progress()
				return true
			}
		case <-p.quit:
			return false
		}
	}
}

// grow doubles the backoff, within [RetryWait, MaxRetryWait].
func (l *loop) grow() {
	l.backoff = min(max(2*l.backoff, l.p.cfg.RetryWait), l.p.cfg.MaxRetryWait)
}

func (l *loop) warn(msg string, err error) {
	l.p.cfg.Logger.Warn("audit: publisher: "+msg, "error", err)
}

// progressIfWaited releases Flush waiters when there are any.
func (l *loop) progressIfWaited() {
	if l.p.nwait.Load() > 0 {
		l.progress()
	}
}

// progress releases the Flush waiters whose events are all acked: those
// whose target is below the oldest accept sequence still held, in flight,
// in the buffer or in the spool.
func (l *loop) progress() {
	p := l.p
	if p.nwait.Load() == 0 {
		return
	}
	low := uint64(math.MaxUint64)
	for i := range l.inflight {
		if l.inflight[i].idx < 0 {
			low = min(low, l.inflight[i].e.seq)
		}
	}
	for i := range l.failed {
		low = min(low, l.failed[i].seq)
	}
	p.mu.Lock()
	low = min(low, p.buf.minSeq(), p.spool.minSeq())
	kept := p.waiters[:0]
	for _, w := range p.waiters {
		if w.target < low {
			close(w.ch)
			p.nwait.Add(-1)
		} else {
			kept = append(kept, w)
		}
	}
	clear(p.waiters[len(kept):])
	p.waiters = kept
	p.mu.Unlock()
}

// shutdown runs when Close stops the loop: every live entry not acked (in
// flight, failed or buffered) is written to the spool as a head segment,
// the spool's files are synced and closed, and its lock released.
func (l *loop) shutdown() {
	p := l.p
	var es []entry
	for _, f := range l.inflight {
		if f.idx < 0 {
			es = append(es, f.e)
		}
	}
	l.inflight = nil
	es = append(es, l.failed...)
	l.failed = nil
	slices.SortFunc(es, func(a, b entry) int { return cmpUint(a.seq, b.seq) })
	p.mu.Lock()
	es = append(es, p.buf.drain()...)
	p.roomLocked()
	var seg *segment
	var err error
	if len(es) > 0 {
		seg, err = p.spool.reserveHead(len(es), es[0].seq)
	}
	p.mu.Unlock()
	if len(es) > 0 {
		if err == nil {
			err = writeSegmentFile(p.spool.path(seg.num), joinLines(es))
		}
		if err != nil {
			for _, e := range es {
				p.cfg.Logger.Error("audit: publisher: event lost: cannot spool at close",
					"event_id", e.id, "event", string(e.data), "error", err)
			}
			p.exitErr = fmt.Errorf("%w: %d events lost at close: %w", ErrSpool, len(es), err)
		} else {
			p.spooled.Add(uint64(len(es)))
		}
	}
	p.mu.Lock()
	p.spool.rotate()
	w := p.spool.takeSyncWork()
	p.mu.Unlock()
	w.dir = true
	if err := w.do(p.spool.dir); err != nil {
		p.cfg.Logger.Error("audit: publisher: spool fsync failed at close", "spool_dir", p.spool.dir, "error", err)
	}
	p.spool.unlock()
	if p.own {
		p.js.CleanupPublisher()
	}
}

// joinLines returns the entries' JSON as JSON lines.
func joinLines(es []entry) []byte {
	n := 0
	for i := range es {
		n += len(es[i].data) + 1
	}
	var b bytes.Buffer
	b.Grow(n)
	for i := range es {
		b.Write(es[i].data)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
