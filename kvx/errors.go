package kvx

import (
	"errors"
	"strings"

	"github.com/jetretry/jetretry/internal/natserr"
	"github.com/jetretry/jetretry/retry"
)

var _ retry.ErrorTyper = (*Error)(nil)

// ErrInvalidArgument matches errors about a nil store, bucket handle or
// manager-less call: mistakes in the calling code, reported before
// anything is sent. Invalid keys and bucket names wrap jetstream's
// ErrInvalidKey and ErrInvalidBucketName instead.
var ErrInvalidArgument = errors.New("kvx: invalid argument")

// Error is a failed key-value operation. It wraps the jetstream error
// unchanged, so errors.Is(err, jetstream.ErrKeyNotFound) and the like keep
// working, and it names that error for audit events and telemetry.
type Error struct {
	// Op is the operation: "create bucket", "get", "put", "create",
	// "update", "delete".
	Op string
	// Bucket is the bucket's name.
	Bucket string
	// Key is the key, empty for bucket operations.
	Key string
	// Err is the underlying error.
	Err error
}

// Error returns "kvx: <op> <bucket>[/<key>]: <err>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("kvx: ")
	b.WriteString(e.Op)
	if e.Bucket != "" || e.Key != "" {
		b.WriteString(" ")
		b.WriteString(e.Bucket)
		if e.Key != "" {
			b.WriteString("/")
			b.WriteString(e.Key)
		}
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown error")
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// ErrorType names the underlying error for audit events (exception_type)
// and the error.type attribute, as natsx.Error does: "nats.ErrTimeout",
// "jetstream.ErrKeyExists", "jetstream.APIError(<err_code>)", or else
// retry.ErrorType of the underlying error.
func (e *Error) ErrorType() string {
	return natserr.ErrorType(e.Err)
}

// fail wraps err from op and marks it for retry.Do with the rules of
// natsx.Classify (shared through internal/natserr): transient NATS errors
// stay retryable, permanent ones get retry.Permanent.
func fail(op, bucket, key string, err error) error {
	if err == nil {
		return nil
	}
	var e error = &Error{Op: op, Bucket: bucket, Key: key, Err: err}
	if retry.IsPermanent(err) || natserr.IsPermanent(err) {
		return retry.Permanent(e)
	}
	return e
}

// invalid returns a permanent *Error for a bad argument.
func invalid(op, bucket, key string, err error) error {
	return retry.Permanent(&Error{Op: op, Bucket: bucket, Key: key, Err: err})
}
