package idempotency

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Memory is an in-process Store for tests, development and single-process
// services. Records do not survive the process; use the JetStream KV store
// for durability.
//
// Memory is safe for concurrent use. Its zero value is ready to use, with
// time.Now as clock and no retention limit.
type Memory struct {
	// Now is the clock. If nil, time.Now is used.
	Now func() time.Time
	// Retention is how long a completed or failed record is kept after its
	// last write. Zero keeps records until cleared.
	Retention time.Duration

	mu   sync.Mutex
	recs map[string]*Record
	rev  uint64
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty memory store with the given clock (nil means
// time.Now) and retention (zero keeps records until cleared).
func NewMemory(now func() time.Time, retention time.Duration) *Memory {
	return &Memory{Now: now, Retention: retention}
}

func (m *Memory) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// lookup returns the live record of key, dropping it if retention expired.
// m.mu must be held.
func (m *Memory) lookup(key string, now time.Time) *Record {
	r := m.recs[key]
	if r == nil {
		return nil
	}
	if m.Retention > 0 && r.State != StateInProgress && now.Sub(r.UpdatedAt) >= m.Retention {
		delete(m.recs, key)
		return nil
	}
	return r
}

// Claim implements Store.
func (m *Memory) Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error) {
	if err := ctx.Err(); err != nil {
		return Claim{}, err
	}
	if !ValidKey(key) {
		return Claim{}, fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	if lease <= 0 {
		return Claim{}, fmt.Errorf("idempotency: lease must be positive, got %v", lease)
	}
	owner, err := newOwner()
	if err != nil {
		return Claim{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	r := m.lookup(key, now)
	if r == nil {
		if m.recs == nil {
			m.recs = make(map[string]*Record)
		}
		m.rev++
		r = &Record{
			Key: key, State: StateInProgress, Owner: owner, LeaseUntil: now.Add(lease),
			Fingerprint: fingerprint, CreatedAt: now, UpdatedAt: now, Revision: m.rev,
		}
		m.recs[key] = r
		return Claim{Key: key, Status: Claimed, Owner: owner, LeaseUntil: r.LeaseUntil, Revision: r.Revision}, nil
	}
	if r.Fingerprint != fingerprint {
		return Claim{}, fmt.Errorf("%w: key %s", ErrKeyReuse, key)
	}
	switch r.State {
	case StateCompleted:
		return Claim{Key: key, Status: Completed, Result: append([]byte(nil), r.Result...), Revision: r.Revision}, nil
	case StateFailed:
		return Claim{Key: key, Status: Failed, Failure: r.Failure, Revision: r.Revision}, nil
	}
	if now.Before(r.LeaseUntil) {
		return Claim{}, fmt.Errorf("%w: key %s owned by %s until %s", ErrInProgress, key, r.Owner, r.LeaseUntil.UTC().Format(time.RFC3339Nano))
	}
	prev := r.Owner
	m.rev++
	r.Owner, r.LeaseUntil, r.UpdatedAt, r.Revision = owner, now.Add(lease), now, m.rev
	return Claim{Key: key, Status: TakenOver, Owner: owner, LeaseUntil: r.LeaseUntil, PreviousOwner: prev, Revision: r.Revision}, nil
}

// owned returns the record c still owns, or ErrLeaseLost. m.mu must be held.
func (m *Memory) owned(c Claim) (*Record, error) {
	if !c.Owned() {
		return nil, fmt.Errorf("idempotency: claim of %s with status %s is not owned", c.Key, c.Status)
	}
	r := m.recs[c.Key]
	if r == nil || r.Revision != c.Revision || r.Owner != c.Owner || r.State != StateInProgress {
		return nil, fmt.Errorf("%w: key %s", ErrLeaseLost, c.Key)
	}
	return r, nil
}

// Renew implements Store.
func (m *Memory) Renew(ctx context.Context, c *Claim, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if lease <= 0 {
		return fmt.Errorf("idempotency: lease must be positive, got %v", lease)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.owned(*c)
	if err != nil {
		return err
	}
	now := m.now()
	m.rev++
	r.LeaseUntil, r.UpdatedAt, r.Revision = now.Add(lease), now, m.rev
	c.LeaseUntil, c.Revision = r.LeaseUntil, r.Revision
	return nil
}

// Complete implements Store.
func (m *Memory) Complete(ctx context.Context, c Claim, result []byte) error {
	return m.finish(ctx, c, StateCompleted, result, "")
}

// Fail implements Store.
func (m *Memory) Fail(ctx context.Context, c Claim, message string) error {
	return m.finish(ctx, c, StateFailed, nil, message)
}

func (m *Memory) finish(ctx context.Context, c Claim, state State, result []byte, failure string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.owned(c)
	if err != nil {
		return err
	}
	m.rev++
	r.State, r.Result, r.Failure = state, append([]byte(nil), result...), failure
	r.Owner, r.LeaseUntil = "", time.Time{}
	r.UpdatedAt, r.Revision = m.now(), m.rev
	return nil
}

// Release implements Store.
func (m *Memory) Release(ctx context.Context, c Claim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.owned(c); err != nil {
		return err
	}
	delete(m.recs, c.Key)
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.lookup(key, m.now())
	if r == nil {
		return Record{}, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	out := *r
	out.Result = append([]byte(nil), r.Result...)
	return out, nil
}

// Clear implements Store.
func (m *Memory) Clear(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lookup(key, m.now()) == nil {
		return fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	delete(m.recs, key)
	return nil
}

// newOwner returns a fresh owner id, a UUIDv7.
func newOwner() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("idempotency: owner id: %w", err)
	}
	return id.String(), nil
}
