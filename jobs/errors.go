package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/jetretry/jetretry/internal/natserr"
)

// Errors of the jobs package. Match them with errors.Is.
var (
	// ErrNotFound means no job has the key.
	ErrNotFound = errors.New("jobs: job not found")
	// ErrInvalidTransition means a control-plane call does not apply to
	// the job's status, such as Requeue of a job that has not failed. See
	// TransitionError.
	ErrInvalidTransition = errors.New("jobs: invalid transition")
	// ErrInvalidConfig means a Config, WorkerConfig or argument is out of
	// range.
	ErrInvalidConfig = errors.New("jobs: invalid config")
	// ErrUnavailable means JetStream could not be reached or failed; the
	// cause is kept.
	ErrUnavailable = errors.New("jobs: unavailable")
	// ErrCorrupt means a stored job record cannot be decoded.
	ErrCorrupt = errors.New("jobs: corrupt record")
	// ErrConflict means the job changed while a control-plane call was
	// updating it, more times than the call retries.
	ErrConflict = errors.New("jobs: concurrent update")
)

// TransitionError says that Op does not apply to a job in status From. It
// matches ErrInvalidTransition.
type TransitionError struct {
	Key  string
	Op   string
	From Status
	// Terminal is the job's terminal designation when the call was made.
	Terminal bool
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("jobs: invalid transition: %s of job %q in status %s", e.Op, e.Key, e.From)
}

// Is reports whether target is ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// opErr wraps an unexpected JetStream error in ErrUnavailable, unless the
// caller cancelled ctx.
func opErr(ctx context.Context, op, key string, err error) error {
	if cerr := ctx.Err(); errors.Is(cerr, context.Canceled) {
		return fmt.Errorf("jobs: %s %s: %w: %w", op, key, cerr, err)
	}
	if natserr.IsPermanent(err) {
		// Refused, not unreachable: a bad config, a conflicting stream,
		// a permission. Retrying will not help.
		return fmt.Errorf("jobs: %s %s: %w", op, key, err)
	}
	return fmt.Errorf("jobs: %s %s: %w: %w", op, key, ErrUnavailable, err)
}
