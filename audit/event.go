package audit

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
)

// SchemaVersion is the version of the event JSON written by this package.
// It is bumped only for changes that are not purely additive.
const SchemaVersion = 1

// Type is the kind of an audit event, the seed 002 `event_type` field.
type Type string

// The event types of seed 002, plus the ones later layers add.
const (
	// TypeRetryAttempt records a failed attempt that will be retried.
	TypeRetryAttempt Type = "retry_attempt"
	// TypeRetryExhausted records the end of a call that failed.
	TypeRetryExhausted Type = "retry_exhausted"
	// TypeIdempotency records an idempotency decision (see Action).
	TypeIdempotency Type = "idempotency"
	// TypeManualOverride records an operator's control-plane action: on a
	// durable job (requeue, reprocess, cancel) or on an idempotency record
	// (clear). Its JSON has the "any other type" shape of AppendJSON.
	TypeManualOverride Type = "manual_override"
)

// Action is the `action` field of an idempotency event.
type Action string

// Idempotency actions.
const (
	// ActionHit means a completed record was found and its cached result
	// returned without running the operation.
	ActionHit Action = "hit"
	// ActionRecord means a result was recorded after a successful run.
	ActionRecord Action = "record"
	// ActionTakeover means an expired claim (an orphan, whose owner is
	// presumed crashed) was taken over by a new owner.
	ActionTakeover Action = "takeover"
)

// Event is one audit record. Its JSON form is a public contract: the field
// names of seed 002 are kept exactly, and event_id, span_id,
// schema_version, stop_reason and additional_context are added.
//
// Which fields appear in the JSON depends on Type; see AppendJSON. An Event
// is a plain value, safe to copy, but copies share its AdditionalContext
// map. The zero value encodes, but Validate rejects it.
type Event struct {
	Type      Type   // event_type
	Category  string // retry_category
	Operation string // operation

	// retry_attempt
	AttemptNumber    int     // attempt_number: the attempt that failed, 1-based
	MaxAttempts      int     // max_attempts
	DelaySeconds     float64 // delay_seconds: the wait before the next attempt
	ExceptionType    string  // exception_type
	ExceptionMessage string  // exception_message

	// retry_exhausted
	TotalAttempts         int    // total_attempts
	FinalExceptionType    string // final_exception_type
	FinalExceptionMessage string // final_exception_message
	StopReason            string // stop_reason: exhausted, permanent, deadline, ...

	// idempotency
	IdempotencyKey string // idempotency_key
	Action         Action // action

	// common
	TenantID          string         // tenant_id
	CorrelationID     string         // correlation_id
	TraceID           string         // trace_id
	SpanID            string         // span_id
	Timestamp         time.Time      // timestamp, RFC 3339 in UTC
	EventID           string         // event_id, a UUIDv7
	SchemaVersion     int            // schema_version
	AdditionalContext map[string]any // additional_context, omitted when empty
}

// Emitter records audit events.
//
// Implementations must be safe for concurrent use. Emit should not block for
// long: an implementation that publishes over the network buffers. Emit
// returns an error only when the event could not be accepted; an
// implementation must never drop an accepted event silently.
type Emitter interface {
	Emit(ctx context.Context, e Event) error
}

// ErrInvalidEvent is matched, through errors.Is, by every error that
// Validate returns.
var ErrInvalidEvent = errors.New("audit: invalid event")

// ValidationError reports the first required field that Validate found
// missing. It unwraps to ErrInvalidEvent.
type ValidationError struct {
	// Field is the JSON name of the missing field, e.g. "event_type".
	Field string
}

// Error implements error.
func (e *ValidationError) Error() string {
	return "audit: invalid event: " + e.Field + " is required"
}

// Unwrap returns ErrInvalidEvent.
func (e *ValidationError) Unwrap() error { return ErrInvalidEvent }

// Validate reports whether e carries the fields every published event must
// have: Type, Category, EventID and a non-zero Timestamp, checked in that
// order. It returns nil or a *ValidationError naming the first missing
// field; that error matches ErrInvalidEvent with errors.Is. Validate does
// not check the type-specific fields, so events of new types validate too.
func (e Event) Validate() error {
	switch {
	case e.Type == "":
		return &ValidationError{Field: "event_type"}
	case e.Category == "":
		return &ValidationError{Field: "retry_category"}
	case e.EventID == "":
		return &ValidationError{Field: "event_id"}
	case e.Timestamp.IsZero():
		return &ValidationError{Field: "timestamp"}
	}
	return nil
}

// NewEventID returns a new event ID: a UUIDv7 in its canonical 36-character
// text form. UUIDv7s sort by creation time, which keeps stream order and ID
// order close. If a UUIDv7 cannot be made (the random source failed), it
// falls back to a random UUIDv4 (uuid.NewString), which panics only if that
// source fails too. Safe for concurrent use.
func NewEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}
