package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by stores. Match them with errors.Is.
var (
	// ErrInProgress means another owner holds a live claim on the key.
	ErrInProgress = errors.New("idempotency: operation in progress")
	// ErrKeyReuse means the key is already used for a different payload
	// (its fingerprint differs).
	ErrKeyReuse = errors.New("idempotency: key reused with a different payload")
	// ErrLeaseLost means the claim is no longer ours: it was taken over,
	// completed, released or cleared by someone else.
	ErrLeaseLost = errors.New("idempotency: lease lost")
	// ErrNotFound means there is no record for the key.
	ErrNotFound = errors.New("idempotency: record not found")
	// ErrInvalidKey means the key is empty or has characters a store
	// cannot hold. Keys from Key are always valid.
	ErrInvalidKey = errors.New("idempotency: invalid key")
	// ErrUnavailable means the store could not be reached. Callers fail
	// closed on it: the operation is not executed.
	ErrUnavailable = errors.New("idempotency: store unavailable")
	// ErrFailed means the key holds a remembered failure (see Store.Fail).
	// An operator clears it to allow a new run.
	ErrFailed = errors.New("idempotency: operation failed before")
	// ErrNotRecorded means the operation ran and succeeded, but its result
	// could not be recorded. The side effect happened.
	ErrNotRecorded = errors.New("idempotency: result not recorded")
)

// State is the state of a record.
type State string

// Record states.
const (
	// StateInProgress: an owner has claimed the key and is running the
	// operation until LeaseUntil.
	StateInProgress State = "in_progress"
	// StateCompleted: the operation succeeded and Result holds its result.
	StateCompleted State = "completed"
	// StateFailed: the operation failed and the caller asked for the
	// failure to be remembered (see Store.Fail).
	StateFailed State = "failed"
)

// Record is the stored state of one key.
type Record struct {
	Key         string    `json:"key"`
	State       State     `json:"state"`
	Owner       string    `json:"owner,omitempty"`
	LeaseUntil  time.Time `json:"lease_until,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	// Result is the JSON-encoded result of a completed operation.
	Result []byte `json:"result,omitempty"`
	// Failure is the error message of a remembered failure.
	Failure   string    `json:"failure,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Revision is the store's revision of the record; it changes on every
	// write and is the basis of compare-and-set.
	Revision uint64 `json:"-"`
}

// Status says what a Claim found.
type Status uint8

// Claim outcomes.
const (
	// Claimed: the key was free and is now ours.
	Claimed Status = iota + 1
	// TakenOver: the key held an expired claim (an orphan) and is now ours.
	// Claim.PreviousOwner names the presumed-crashed owner.
	TakenOver
	// Completed: the operation already succeeded; Claim.Result holds the
	// cached result. Nothing is owned.
	Completed
	// Failed: a remembered failure; Claim.Failure holds its message.
	// Nothing is owned.
	Failed
)

// String returns the lowercase name of s.
func (s Status) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case TakenOver:
		return "taken_over"
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Claim is the result of Store.Claim. When Status is Claimed or TakenOver,
// the caller owns the key until LeaseUntil and must end the claim with
// Complete, Fail or Release (or keep it alive with Renew).
type Claim struct {
	Key           string
	Status        Status
	Owner         string
	LeaseUntil    time.Time
	PreviousOwner string
	Result        []byte
	Failure       string
	// Revision is the record revision this claim wrote; compare-and-set
	// operations on the claim use it.
	Revision uint64
}

// Owned reports whether the claim gives the caller ownership of the key.
func (c Claim) Owned() bool { return c.Status == Claimed || c.Status == TakenOver }

// Store holds idempotency records. The flow is: Claim; on Claimed or
// TakenOver run the operation, Renew while it runs, then Complete on
// success, or Release (or Fail) on failure.
//
// Implementations must be safe for concurrent use by many goroutines and,
// for durable stores, many processes: two concurrent Claims of a free key
// must never both return an owned claim. Decisions are made from
// compare-and-set results, never from a read that follows a write.
type Store interface {
	// Claim claims key for an operation whose payload has the given
	// fingerprint, with a lease of the given length. It returns
	// ErrInProgress when a live claim exists, ErrKeyReuse when the record
	// has another fingerprint, ErrInvalidKey for a bad key and an error
	// matching ErrUnavailable when the store cannot be reached.
	Claim(ctx context.Context, key, fingerprint string, lease time.Duration) (Claim, error)
	// Renew extends an owned claim's lease to now+lease and updates
	// c.Revision and c.LeaseUntil. It returns ErrLeaseLost when the claim
	// is no longer ours.
	Renew(ctx context.Context, c *Claim, lease time.Duration) error
	// Complete records the JSON-encoded result of an owned claim. It
	// returns ErrLeaseLost when the claim is no longer ours.
	Complete(ctx context.Context, c Claim, result []byte) error
	// Fail records a failure message for an owned claim, so that later
	// claims of the key get Status Failed until the record is cleared.
	// It returns ErrLeaseLost when the claim is no longer ours.
	Fail(ctx context.Context, c Claim, message string) error
	// Release deletes an owned claim so the key can be claimed again. It
	// returns ErrLeaseLost when the claim is no longer ours.
	Release(ctx context.Context, c Claim) error
	// Get returns the record of key, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
	// Clear deletes the record of key whatever its state: an operator's
	// manual override. It returns ErrNotFound when there is none.
	Clear(ctx context.Context, key string) error
}

// ValidKey reports whether key can be held by every store: 1 to 256 bytes
// of ASCII letters, digits, '-', '_', '=' and '.', with no leading,
// trailing or doubled '.', as NATS KV keys allow. Keys from Key, 64 hex
// digits, are always valid.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > 256 || key[0] == '.' || key[len(key)-1] == '.' {
		return false
	}
	prevDot := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '=':
			prevDot = false
		case c == '.':
			if prevDot {
				return false
			}
			prevDot = true
		default:
			return false
		}
	}
	return true
}
