// Package kvcas recognises the errors of JetStream's compare-and-set
// writes, for the packages that keep state in KV buckets (idempotency,
// jobs). It imports nothing of jetretry, so any package may use it.
package kvcas

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// IsConflict reports whether err is a compare-and-set conflict: the key
// exists (KV Create) or has another revision (KV Update or Delete, or a
// publish that expects a last subject sequence). Single-replica streams
// report it as API error 10071, which jetstream.ErrKeyExists matches by
// code; replicated streams as 10164, which only
// jetstream.ErrKeyRevisionMismatch matches, and Create on a deleted key
// returns either code unwrapped.
func IsConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
