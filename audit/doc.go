// Package audit defines jetretry's audit events, their JSON encoding, and
// emitters that record them.
//
// Every retry decision and every idempotency decision is recorded as an
// Event and handed to an Emitter. Memory keeps events for tests, Slog
// writes them as log records, and Publisher appends them to the JetStream
// audit stream. Query, Tail and Stats read the stream back.
//
// # The audit stream
//
// EnsureStream creates the stream a StreamConfig describes (default name
// JETRETRY_AUDIT, subjects "jetretry.audit.>"). It is append-only: delete,
// purge and rollup are refused, events leave it only by MaxAge, and its
// Duplicates window (default 10 minutes) makes re-publishing an event
// harmless. Each event is published on
// "<prefix>.<event_type>.<retry_category>" (Subject), with both tokens
// sanitized so that no event text can add a token or a wildcard, and with
// its event_id as the Nats-Msg-Id header; FilterSubject builds the
// matching filters, for this package's readers and for the nats CLI.
//
// # Publishing without losing events
//
// A Publisher's Emit never waits on the network: it queues the encoded
// event in a bounded buffer, and a background goroutine publishes it with
// PublishMsgAsync and tracks its ack. When the buffer is full, or a publish
// fails or times out because NATS is down, events go to a local spool
// directory (JSON lines, fsynced every SyncInterval) instead. Once anything
// is spooled, later events are spooled behind it until the spool is
// drained, so the spool is a single FIFO: it is replayed in order, oldest
// segment first, once NATS answers, and a segment is deleted only when the
// stream has acked every event in it. A new Publisher replays the spool an
// earlier process left. Re-publishing an event whose ack was lost is
// deduplicated by the stream within its Duplicates window, so an outage
// loses no event and, unless it outlasts that window, stores none twice.
// Flush waits for the acks; Close flushes what it can and spools the rest.
//
// # Reading and statistics
//
// Query returns the events matching a Filter (types, categories, tenant,
// correlation id, time range), read with an ordered consumer up to the
// stream's last message at the time of the call; Tail follows new events.
// ComputeStats turns events into per-category CategoryStats, seed 002's
// "Retry Pattern Analysis": attempts, exhaustions, idempotency hits and
// records, success rate and average attempts of the calls that failed at
// least once (a call that succeeds at its first attempt emits no event, so
// it is not counted). Stats does both against the stream.
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
