package audit

import (
	"context"
	"maps"
	"slices"
	"sync"
)

var _ Emitter = (*Memory)(nil)

// Memory is an Emitter that keeps events in memory, in the order they were
// emitted. It is meant for tests and demos: nothing bounds its size.
//
// The zero value is ready to use. A Memory is safe for concurrent use and
// must not be copied after first use.
type Memory struct {
	mu     sync.Mutex
	events []Event
}

// Emit appends e, with a shallow copy of its AdditionalContext so that
// later changes to the caller's map do not show. It never blocks on the
// context and always returns nil.
func (m *Memory) Emit(_ context.Context, e Event) error {
	e.AdditionalContext = maps.Clone(e.AdditionalContext)
	m.mu.Lock()
	m.events = append(m.events, e)
	m.mu.Unlock()
	return nil
}

// Events returns a copy of the events emitted so far, oldest first, or nil
// when there are none. The AdditionalContext maps are shared with the
// Memory: callers must not modify them.
func (m *Memory) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.events)
}

// Filter returns, oldest first, the emitted events for which keep returns
// true, or nil when none match. A nil keep matches every event. keep runs
// on a snapshot, without the Memory locked, so it may call the Memory. The
// AdditionalContext maps are shared as with Events.
func (m *Memory) Filter(keep func(Event) bool) []Event {
	m.mu.Lock()
	snapshot := m.events[:len(m.events):len(m.events)]
	m.mu.Unlock()
	var out []Event
	for _, e := range snapshot {
		if keep == nil || keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Len returns the number of events emitted since creation or the last
// Reset.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.events)
}

// Reset discards every event.
func (m *Memory) Reset() {
	m.mu.Lock()
	m.events = nil
	m.mu.Unlock()
}
