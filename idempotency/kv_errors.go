package idempotency

import (
	"errors"
	"fmt"
)

// Errors of the JetStream KV store. Match them with errors.Is.
var (
	// ErrInvalidConfig means a KVConfig field is out of range.
	ErrInvalidConfig = errors.New("idempotency: invalid config")
	// ErrResultTooLarge means a result is too large for the store to
	// record. Nothing was written: the claim is still owned, and the
	// execution is not recorded as done. See ResultTooLargeError.
	ErrResultTooLarge = errors.New("idempotency: result too large")
	// ErrCorrupt means a stored record cannot be decoded: bad JSON, an
	// unknown version or missing fields, perhaps written by a foreign
	// program. Stores fail closed on it: Claim returns it and nothing is
	// executed until an operator clears the key. See CorruptRecordError.
	ErrCorrupt = errors.New("idempotency: corrupt record")
)

// ResultTooLargeError says that the record of a completed operation would
// exceed the largest value the store can write. It matches
// ErrResultTooLarge.
type ResultTooLargeError struct {
	Key string
	// Size is the size in bytes of the encoded record that was refused.
	Size int
	// Max is the largest record the store can write, in bytes.
	Max int
}

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("idempotency: result of key %s too large: record is %d bytes, the store takes at most %d", e.Key, e.Size, e.Max)
}

// Is reports whether target is ErrResultTooLarge.
func (e *ResultTooLargeError) Is(target error) bool { return target == ErrResultTooLarge }

// CorruptRecordError says that the record of Key at Revision cannot be
// decoded. It matches ErrCorrupt and unwraps to the decoding error.
type CorruptRecordError struct {
	Key      string
	Revision uint64
	Err      error
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("idempotency: corrupt record for key %s at revision %d: %v", e.Key, e.Revision, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *CorruptRecordError) Unwrap() error { return e.Err }
