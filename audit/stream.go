package audit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of StreamConfig.
const (
	// DefaultStreamName is the default name of the audit stream.
	DefaultStreamName = "JETRETRY_AUDIT"
	// DefaultSubjectPrefix is the default subject prefix of audit events.
	DefaultSubjectPrefix = "jetretry.audit"
	// DefaultDuplicates is the default dedupe window of the audit stream.
	DefaultDuplicates = 10 * time.Minute
)

// ErrInvalidConfig is matched, through errors.Is, by every error that
// reports a bad StreamConfig or PublisherConfig.
var ErrInvalidConfig = errors.New("audit: invalid config")

// StreamConfig describes the audit stream. It is a plain struct: the zero
// value gives the defaults documented on each field. The same config is
// passed to EnsureStream, Query, Tail and Stats, so that readers and
// writers agree on the stream name and subject prefix.
type StreamConfig struct {
	// Name is the stream name. Default "JETRETRY_AUDIT". It must be a
	// valid JetStream stream name: no whitespace, '.', '*', '>', '/' or
	// '\'.
	Name string

	// SubjectPrefix is the subject prefix of audit events; the stream
	// binds "<SubjectPrefix>.>" and an event is published on
	// "<SubjectPrefix>.<event_type>.<retry_category>" (see Subject).
	// Default "jetretry.audit". It must be a literal subject: dot-separated
	// non-empty tokens without whitespace, '*' or '>'.
	SubjectPrefix string

	// Replicas is the number of stream replicas, 1 to 5. Default 1; use 3
	// on a cluster.
	Replicas int

	// MaxAge is how long events are kept. Default 0, which keeps them
	// forever: the stream is append-only, so events leave it only by
	// age. Negative values are invalid.
	MaxAge time.Duration

	// Duplicates is the dedupe window. Default 10 minutes. A message whose
	// Nats-Msg-Id (the event_id) was already stored within the window is
	// acknowledged but not stored again, so it bounds how long after its
	// first publish an event can be re-published (after a lost ack or an
	// outage) without being duplicated. Keep it longer than the outages a
	// Publisher must ride out. It must not exceed a non-zero MaxAge.
	Duplicates time.Duration

	// Storage is the storage backend. Default jetstream.FileStorage (the
	// zero value).
	Storage jetstream.StorageType
}

// WithDefaults returns c with the defaults filled in for its zero fields.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.Name == "" {
		c.Name = DefaultStreamName
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 {
		c.Duplicates = DefaultDuplicates
	}
	return c
}

// Validate checks c after applying WithDefaults. It returns nil or an error
// that matches ErrInvalidConfig.
func (c StreamConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case strings.ContainsAny(c.Name, " \t\r\n.*>/\\"):
		return invalidConfig("stream name %q contains a space, '.', '*', '>', '/' or '\\'", c.Name)
	case c.Replicas < 1 || c.Replicas > 5:
		return invalidConfig("replicas %d is not between 1 and 5", c.Replicas)
	case c.MaxAge < 0:
		return invalidConfig("negative max age %v", c.MaxAge)
	case c.Duplicates < 0:
		return invalidConfig("negative duplicates window %v", c.Duplicates)
	case c.MaxAge > 0 && c.Duplicates > c.MaxAge:
		return invalidConfig("duplicates window %v exceeds max age %v", c.Duplicates, c.MaxAge)
	case c.Storage != jetstream.FileStorage && c.Storage != jetstream.MemoryStorage:
		return invalidConfig("unknown storage type %d", c.Storage)
	}
	return validatePrefix(c.SubjectPrefix)
}

// validatePrefix checks that p is a literal subject.
func validatePrefix(p string) error {
	for _, tok := range strings.Split(p, ".") {
		if tok == "" || strings.ContainsAny(tok, " \t\r\n*>") {
			return invalidConfig("subject prefix %q is not a literal subject", p)
		}
	}
	return nil
}

func invalidConfig(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

// jetstreamConfig returns the JetStream config of the audit stream for c,
// which has its defaults applied.
func (c StreamConfig) jetstreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        c.Name,
		Description: "jetretry audit events (append-only)",
		Subjects:    []string{c.SubjectPrefix + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Storage:     c.Storage,
		Replicas:    c.Replicas,
		MaxAge:      c.MaxAge,
		Duplicates:  c.Duplicates,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowRollup: false,
	}
}

// EnsureStream creates the audit stream described by cfg, or updates it
// when it exists. The stream binds "<SubjectPrefix>.>", keeps messages by
// MaxAge only (no message or byte limits), and is append-only: DenyDelete
// and DenyPurge are set and AllowRollup is not, so neither the API nor a
// rollup header can remove an event.
//
// It returns an error matching ErrInvalidConfig for a bad cfg, or the
// JetStream error, wrapped, when the server refuses the stream (for
// example when another stream already binds the subjects). Like the
// jetstream package, it applies the JetStream default timeout when ctx has
// no deadline.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	s, err := js.CreateOrUpdateStream(ctx, cfg.jetstreamConfig())
	if err != nil {
		return nil, fmt.Errorf("audit: ensure stream %s: %w", cfg.Name, err)
	}
	return s, nil
}
