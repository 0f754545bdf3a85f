package retry

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
)

// DefaultLease is the idempotency claim lease a Manager uses unless
// WithLease says otherwise. The owner renews it while it works, so it only
// bounds how long a crashed owner's claim blocks the key.
const DefaultLease = 30 * time.Second

// Manager holds the policies, audit emitter, idempotency store, clock and
// telemetry that Do uses. Build one with NewManager and share it: a Manager
// is safe for concurrent use and immutable after construction.
type Manager struct {
	policies map[Category]*Policy
	fallback Policy
	emitter  audit.Emitter
	store    idempotency.Store
	clock    Clock
	rand     Random
	logger   *slog.Logger
	lease    time.Duration
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	tel      atomic.Pointer[telemetry]

	fpMu sync.RWMutex
	fps  map[fpKey]string // default fingerprints
}

// ManagerOption configures a Manager.
type ManagerOption func(*Manager) error

// NewManager returns a Manager. Without options it applies DefaultPolicy to
// every category; pass WithPolicies(categories.Defaults()) for seed 002's
// matrix. It returns an error wrapping ErrInvalidOption or ErrInvalidPolicy
// for bad options.
func NewManager(opts ...ManagerOption) (*Manager, error) {
	m := &Manager{
		fallback: DefaultPolicy(),
		clock:    systemClock{},
		rand:     systemRandom{},
		lease:    DefaultLease,
	}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalidOption)
		}
		if err := o(m); err != nil {
			return nil, err
		}
	}
	if m.logger == nil {
		m.logger = slog.Default()
	}
	return m, nil
}

// WithPolicies sets the policy of each category in ps, replacing earlier
// settings for those categories. Every policy must be valid.
func WithPolicies(ps map[Category]Policy) ManagerOption {
	return func(m *Manager) error {
		for c, p := range ps {
			if c == "" {
				return fmt.Errorf("%w: empty category", ErrInvalidOption)
			}
			if err := p.Validate(); err != nil {
				return fmt.Errorf("retry: category %s: %w", c, err)
			}
		}
		if m.policies == nil {
			m.policies = make(map[Category]*Policy, len(ps))
		}
		for c, p := range ps {
			m.policies[c] = &p
		}
		return nil
	}
}

// WithDefaultPolicy sets the policy for categories without one of their
// own. The default is DefaultPolicy().
func WithDefaultPolicy(p Policy) ManagerOption {
	return func(m *Manager) error {
		if err := p.Validate(); err != nil {
			return fmt.Errorf("retry: default policy: %w", err)
		}
		m.fallback = p
		return nil
	}
}

// WithEmitter sets the audit emitter. Without one, no audit events are
// emitted.
func WithEmitter(e audit.Emitter) ManagerOption {
	return func(m *Manager) error {
		if e == nil {
			return fmt.Errorf("%w: nil emitter", ErrInvalidOption)
		}
		m.emitter = e
		return nil
	}
}

// WithStore sets the idempotency store that calls with an idempotency key
// use. Without one, such calls fail with an error matching
// idempotency.ErrUnavailable (fail closed).
func WithStore(s idempotency.Store) ManagerOption {
	return func(m *Manager) error {
		if s == nil {
			return fmt.Errorf("%w: nil store", ErrInvalidOption)
		}
		m.store = s
		return nil
	}
}

// WithLease sets the idempotency claim lease; DefaultLease by default. The
// owner renews the claim every third of it while the call runs.
func WithLease(d time.Duration) ManagerOption {
	return func(m *Manager) error {
		if d <= 0 {
			return fmt.Errorf("%w: lease must be positive, got %v", ErrInvalidOption, d)
		}
		m.lease = d
		return nil
	}
}

// WithClock sets the clock; the real one by default.
func WithClock(c Clock) ManagerOption {
	return func(m *Manager) error {
		if c == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		m.clock = c
		return nil
	}
}

// WithRandom sets the random source for jitter; by default
// math/rand/v2's randomly seeded generator.
func WithRandom(r Random) ManagerOption {
	return func(m *Manager) error {
		if r == nil {
			return fmt.Errorf("%w: nil random source", ErrInvalidOption)
		}
		m.rand = r
		return nil
	}
}

// WithLogger sets the logger for problems that do not fail a call, such as
// an audit event the emitter refused; slog.Default() by default.
func WithLogger(l *slog.Logger) ManagerOption {
	return func(m *Manager) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		m.logger = l
		return nil
	}
}

// WithTracerProvider sets the OpenTelemetry tracer provider. By default the
// global provider is looked up at every call, so one installed later is
// used; while the global provider is the API's default (no SDK installed)
// no spans are started, since nothing would record them.
func WithTracerProvider(tp trace.TracerProvider) ManagerOption {
	return func(m *Manager) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
		}
		m.tp = tp
		return nil
	}
}

// WithMeterProvider sets the OpenTelemetry meter provider, with the same
// defaults as WithTracerProvider.
func WithMeterProvider(mp metric.MeterProvider) ManagerOption {
	return func(m *Manager) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
		}
		m.mp = mp
		return nil
	}
}

// Policy returns the policy Do uses for category c: its own, or the
// manager's default policy for categories without one.
func (m *Manager) Policy(c Category) Policy {
	return *m.policy(c)
}

// policy is Policy without copying.
func (m *Manager) policy(c Category) *Policy {
	if p, ok := m.policies[c]; ok {
		return p
	}
	return &m.fallback
}

// Policies returns a copy of the per-category policies.
func (m *Manager) Policies() map[Category]Policy {
	out := make(map[Category]Policy, len(m.policies))
	for c, p := range m.policies {
		out[c] = *p
	}
	return out
}
