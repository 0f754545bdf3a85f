// Package audit defines jetretry's audit events, their JSON encoding, and
// emitters that record them.
//
// Every retry decision and every idempotency decision is recorded as an
// Event and handed to an Emitter. Memory keeps events for tests and Slog
// writes them as log records; a JetStream publisher, added later, appends
// them to the audit stream.
//
// # The event contract
//
// The JSON form of an Event is a public contract for the programs that read
// the audit stream. The field names of seed 002 are kept exactly, and each
// event type always carries its seed fields, even when they are zero or
// empty, so every event of a type has the same shape:
//
//	event_type       fields, in order
//	---------------  -------------------------------------------------------
//	retry_attempt    event_type, retry_category, operation, attempt_number,
//	                 max_attempts, delay_seconds, exception_type,
//	                 exception_message, tenant_id, correlation_id, trace_id,
//	                 timestamp, span_id, event_id, schema_version
//	retry_exhausted  event_type, retry_category, operation, total_attempts,
//	                 final_exception_type, final_exception_message,
//	                 tenant_id, correlation_id, trace_id, timestamp,
//	                 stop_reason (when set), span_id, event_id,
//	                 schema_version
//	idempotency      event_type, retry_category, operation, idempotency_key,
//	                 action, tenant_id, correlation_id, trace_id, timestamp,
//	                 span_id, event_id, schema_version
//	any other type   event_type, retry_category, operation, the non-zero
//	                 type-specific fields above, tenant_id, correlation_id,
//	                 trace_id, timestamp, span_id, event_id, schema_version
//
// Every type ends with additional_context, an object with sorted keys,
// when it has entries. Other types (a takeover, a manual override, a job
// state change) are added by the layers that need them.
//
// Meaning of the fields:
//
//   - attempt_number is the 1-based number of the attempt that failed, and
//     delay_seconds the wait, in seconds, before the next attempt. The
//     attempt after attempt_number 2 is attempt 3.
//   - total_attempts is the number of attempts made before giving up, and
//     stop_reason why the retrying stopped (exhausted, permanent, deadline,
//     ...).
//   - action is "hit" (a cached result was returned), "record" (a result
//     was stored) or "takeover" (an expired claim was taken over).
//   - timestamp is RFC 3339 in UTC, with fractional seconds only when they
//     are non-zero.
//   - exception_message and final_exception_message are bounded by
//     MaxMessageBytes; producers pass them through TruncateMessage.
//   - schema_version is SchemaVersion. It changes only for changes that are
//     not purely additive: consumers must ignore fields they do not know.
//   - event_id is a UUIDv7 from NewEventID. The publisher uses it as the
//     Nats-Msg-Id header, so publishing the same event twice, for example
//     after a reconnect, stores it once.
//
// Event.AppendJSON writes the JSON without allocating, and Event.UnmarshalJSON
// reads it back. Event.Validate checks the fields every published event
// needs.
package audit
