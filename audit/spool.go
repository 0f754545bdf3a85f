package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Spool layout. A spool directory holds one lock file and segment files
// named by a 20-digit segment number; replay reads them in number order.
// Each segment is JSON lines: one event per line, exactly the bytes that
// are published.
const (
	segmentExt = ".jsonl"
	tmpExt     = ".tmp" // a head segment being written: segment name + ".tmp"
	badExt     = ".bad" // a replayed segment that held unreadable lines
	lockName   = "LOCK"

	// firstSegment is the number of the first segment of a new spool. It
	// leaves room below for head segments (see reserveHead).
	firstSegment = 1 << 32
)

// segment is one spool file.
type segment struct {
	num    uint64
	n      int    // lines written, unreadable ones included
	bytes  int64  // bytes written
	minSeq uint64 // accept sequence of its oldest event; 0 when from an earlier process
	dirty  bool   // written since the last fsync
	loaded bool   // left by an earlier process; its lines count as pending
	// f is open while the segment is written, and until the syncer or the
	// run loop takes it (under the lock) to close it. Emit writes through
	// it while the segment is active.
	f *os.File
}

// spool is the on-disk FIFO of events the publisher holds. Its segments are
// the closed ones, oldest first, then the active one that Emit appends to.
// Every method must be called with Publisher.mu held, except the functions
// that only take paths (writeSegmentFile, readSegment, syncDir).
type spool struct {
	dir      string
	lock     *os.File
	closed   []*segment
	active   *segment
	next     uint64 // number of the next active segment
	maxBytes int64
	dirDirty bool // a file was created or renamed since the last directory fsync
}

// openSpool locks dir, creating it if needed, and indexes the segments an
// earlier process left. It returns the spool and the number of lines in
// them.
func openSpool(dir string, maxBytes int64) (*spool, int64, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, 0, err
	}
	lock, err := lockDir(filepath.Join(dir, lockName))
	if err != nil {
		return nil, 0, err
	}
	s := &spool{dir: dir, lock: lock, next: firstSegment, maxBytes: maxBytes}
	names, err := os.ReadDir(dir)
	if err != nil {
		s.unlock()
		return nil, 0, err
	}
	var lines int64
	for _, de := range names {
		name := de.Name()
		if strings.HasSuffix(name, segmentExt+tmpExt) {
			// A head segment whose write was cut short: keep the lines
			// that made it, as for a torn active segment.
			final := strings.TrimSuffix(name, tmpExt)
			if err := os.Rename(filepath.Join(dir, name), filepath.Join(dir, final)); err != nil {
				s.unlock()
				return nil, 0, err
			}
			s.dirDirty = true
			name = final
		}
		num, ok := segmentNum(name)
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			s.unlock()
			return nil, 0, err
		}
		if len(data) == 0 {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		// Lines as readSegment sees them: a torn one counts until replay
		// finds it unreadable; blank ones do not count.
		n := 0
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			if len(bytes.TrimSpace(line)) > 0 {
				n++
			}
		}
		lines += int64(n)
		s.closed = append(s.closed, &segment{num: num, n: n, bytes: int64(len(data)), loaded: true})
	}
	slices.SortFunc(s.closed, func(a, b *segment) int { return cmpUint(a.num, b.num) })
	if k := len(s.closed); k > 0 {
		s.next = max(s.next, s.closed[k-1].num+1)
	}
	return s, lines, nil
}

func segmentNum(name string) (uint64, bool) {
	base, ok := strings.CutSuffix(name, segmentExt)
	if !ok || len(base) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(base, 10, 64)
	return n, err == nil && n > 0
}

func (s *spool) path(num uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", num, segmentExt))
}

// empty reports whether the spool holds no segment and no written line.
func (s *spool) empty() bool {
	return len(s.closed) == 0 && (s.active == nil || s.active.bytes == 0)
}

// minSeq returns the smallest accept sequence in the spool, or MaxUint64
// when it is empty.
func (s *spool) minSeq() uint64 {
	m := uint64(math.MaxUint64)
	for _, seg := range s.closed {
		m = min(m, seg.minSeq)
	}
	if s.active != nil && s.active.n > 0 {
		m = min(m, s.active.minSeq)
	}
	return m
}

// append writes one line (an event and its newline) to the active
// segment, creating it if needed, and rotates the segment once it reaches
// maxBytes. After a failed write the segment is closed, so that a partial
// line can only ever be the last line of a segment.
func (s *spool) append(line []byte, seq uint64) error {
	if s.active == nil {
		f, err := os.OpenFile(s.path(s.next), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		s.active = &segment{num: s.next, f: f, minSeq: math.MaxUint64}
		s.next++
		s.dirDirty = true
	}
	a := s.active
	n, err := a.f.Write(line)
	a.bytes += int64(n)
	if n > 0 {
		a.dirty = true
	}
	if err != nil {
		s.rotate()
		return err
	}
	if a.n == 0 {
		a.minSeq = seq
	}
	a.n++
	if a.bytes >= s.maxBytes {
		s.rotate()
	}
	return nil
}

// rotate closes the active segment: it joins the closed ones, its file
// still open for the run loop to sync and close. An active segment with
// nothing written is removed instead.
func (s *spool) rotate() {
	a := s.active
	if a == nil {
		return
	}
	s.active = nil
	if a.bytes == 0 {
		_ = a.f.Close()
		_ = os.Remove(s.path(a.num))
		return
	}
	s.closed = append(s.closed, a)
}

// reserveHead registers a segment of n events, the oldest with accept
// sequence minSeq, ahead of every other segment. The caller then writes it
// with writeSegmentFile, without the lock, and calls unreserve if that
// fails. While reserved, the spool is not empty, so Emit appends behind it.
func (s *spool) reserveHead(n int, minSeq uint64) (*segment, error) {
	head := s.next
	if len(s.closed) > 0 {
		head = s.closed[0].num
	} else if s.active != nil {
		head = s.active.num
	}
	if head <= 1 {
		return nil, errors.New("segment numbers exhausted")
	}
	seg := &segment{num: head - 1, n: n, minSeq: minSeq}
	s.closed = slices.Insert(s.closed, 0, seg)
	return seg, nil
}

// remove forgets seg.
func (s *spool) remove(seg *segment) {
	if i := slices.Index(s.closed, seg); i >= 0 {
		s.closed = slices.Delete(s.closed, i, i+1)
	}
}

// syncWork is what the syncer does outside the lock: fsync active (which
// stays open), fsync and close each of closing, fsync the files at paths
// (closed segments whose file the run loop already closed; one may be
// gone, replayed and removed), then fsync the directory if dir.
type syncWork struct {
	active     *os.File
	activePath string // to sync by path if the run loop closed active meanwhile
	closing    []*os.File
	paths      []string
	dir        bool
}

// takeSyncWork collects the fsyncs due and marks them done: the dirty
// segments and the directory. The files of closed segments are taken to
// be closed.
func (s *spool) takeSyncWork() syncWork {
	var w syncWork
	if a := s.active; a != nil && a.dirty {
		a.dirty = false
		w.active, w.activePath = a.f, s.path(a.num)
	}
	for _, seg := range s.closed {
		switch {
		case seg.f != nil:
			w.closing = append(w.closing, seg.f)
			seg.f = nil
		case seg.dirty:
			w.paths = append(w.paths, s.path(seg.num))
		}
		seg.dirty = false
	}
	w.dir, s.dirDirty = s.dirDirty, false
	return w
}

// do performs w and returns the first error, ignoring files already
// removed.
func (w syncWork) do(dir string) error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrClosed) {
			first = err
		}
	}
	if w.active != nil {
		if err := w.active.Sync(); errors.Is(err, os.ErrClosed) {
			w.paths = append(w.paths, w.activePath)
		} else {
			keep(err)
		}
	}
	for _, f := range w.closing {
		keep(f.Sync())
		keep(f.Close())
	}
	for _, path := range w.paths {
		f, err := os.Open(path)
		if err != nil {
			keep(err)
			continue
		}
		keep(f.Sync()) // on Linux, fsync through any descriptor flushes the file
		keep(f.Close())
	}
	if w.dir {
		keep(syncDir(dir))
	}
	return first
}

// unlock releases the spool directory lock.
func (s *spool) unlock() {
	if s.lock != nil {
		_ = s.lock.Close()
		s.lock = nil
	}
}

// writeSegmentFile writes data as the complete segment file path: it
// writes a temporary file, fsyncs it and renames it into place.
func writeSegmentFile(path string, data []byte) error {
	tmp := path + tmpExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// readSegment reads the events of a segment file. Lines that do not decode
// to a valid Event (a line torn by a crash) are counted in bad, not
// returned. Blank lines are ignored.
func readSegment(path string) (entries []entry, bad int, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	for line := range bytes.SplitSeq(data, []byte{'\n'}) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		// Only the fields the subject and headers need, and Validate
		// checks, are decoded.
		var h struct {
			Type      Type      `json:"event_type"`
			Category  string    `json:"retry_category"`
			EventID   string    `json:"event_id"`
			Timestamp time.Time `json:"timestamp"`
		}
		if json.Unmarshal(line, &h) != nil ||
			(Event{Type: h.Type, Category: h.Category, EventID: h.EventID, Timestamp: h.Timestamp}).Validate() != nil {
			bad++
			continue
		}
		entries = append(entries, entry{
			data: line, id: h.EventID, typ: h.Type, cat: h.Category, ts: h.Timestamp,
		})
	}
	return entries, bad, nil
}

// syncDir fsyncs a directory, so that files created, renamed or removed in
// it survive a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
