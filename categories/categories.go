// Package categories defines the 17 retry category codes of seed 002 and
// their default policy matrix.
//
// A Category is a retry.Category, so the constants here can be passed to
// retry.Do directly:
//
//	mgr, err := retry.NewManager(retry.WithPolicies(categories.Defaults()))
//	v, err := retry.Do(ctx, mgr, categories.KVGet, "get kill switch", fn)
//
// The codes are spelled exactly as seed 002 spells them, including
// "REPLAY_REPLAY_PROCESSING" and "REPLAY_REPLAY_VALIDATION" for the two
// replay categories.
package categories

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetretry/jetretry/retry"
)

// Category is a retry category code.
type Category = retry.Category

// The 17 categories of seed 002.
const (
	NATSConnect      Category = "RETRY_NATS_CONNECT"
	NATSPublish      Category = "RETRY_NATS_PUBLISH"
	NATSSubscribe    Category = "RETRY_NATS_SUBSCRIBE"
	NATSStreamCreate Category = "RETRY_NATS_STREAM_CREATE"

	KVCreate Category = "RETRY_KV_CREATE"
	KVGet    Category = "RETRY_KV_GET"
	KVPut    Category = "RETRY_KV_PUT"
	KVDelete Category = "RETRY_KV_DELETE"

	ExecutionIntent      Category = "RETRY_EXECUTION_INTENT"
	ExecutionContainment Category = "RETRY_EXECUTION_CONTAINMENT"
	ExecutionExpiration  Category = "RETRY_EXECUTION_EXPIRATION"

	ApprovalCheck Category = "RETRY_APPROVAL_CHECK"
	ApprovalGrant Category = "RETRY_APPROVAL_GRANT"

	ReplayProcessing Category = "REPLAY_REPLAY_PROCESSING"
	ReplayValidation Category = "REPLAY_REPLAY_VALIDATION"

	APIRequest    Category = "RETRY_API_REQUEST"
	APIValidation Category = "RETRY_API_VALIDATION"
)

// all lists the categories in seed 002's order.
var all = [...]Category{
	NATSConnect, NATSPublish, NATSSubscribe, NATSStreamCreate,
	KVCreate, KVGet, KVPut, KVDelete,
	ExecutionIntent, ExecutionContainment, ExecutionExpiration,
	ApprovalCheck, ApprovalGrant,
	ReplayProcessing, ReplayValidation,
	APIRequest, APIValidation,
}

// All returns the 17 categories in seed 002's order.
func All() []Category {
	out := make([]Category, len(all))
	copy(out, all[:])
	return out
}

// Name returns the seed 002 enum member name of c ("KV_GET" for
// "RETRY_KV_GET", "REPLAY_PROCESSING" for "REPLAY_REPLAY_PROCESSING"): the
// code without its first token. It returns "" for an unknown category.
func Name(c Category) string {
	if !Known(c) {
		return ""
	}
	_, name, _ := strings.Cut(string(c), "_")
	return name
}

// ErrUnknown matches the error Parse returns for an unknown code.
var ErrUnknown = errors.New("categories: unknown category")

// UnknownError is returned by Parse for a string that is neither a category
// code nor an enum member name.
type UnknownError struct {
	Input string
}

func (e *UnknownError) Error() string {
	return fmt.Sprintf("categories: unknown category %q", e.Input)
}

// Is makes an UnknownError match ErrUnknown.
func (e *UnknownError) Is(target error) bool { return target == ErrUnknown }

// Parse returns the category whose code is s ("RETRY_KV_GET") or whose seed
// 002 enum member name is s ("KV_GET"). Matching is exact. Any other string
// gives an *UnknownError, which matches ErrUnknown.
func Parse(s string) (Category, error) {
	for _, c := range all {
		if string(c) == s || Name(c) == s {
			return c, nil
		}
	}
	return "", &UnknownError{Input: s}
}

// Known reports whether c is one of the 17 categories.
func Known(c Category) bool {
	for _, k := range all {
		if k == c {
			return true
		}
	}
	return false
}

// policy builds one row of the matrix: backoff ×2 and ±10% jitter, as in
// every row of seed 002.
func policy(attempts int, base, maxDelay time.Duration) retry.Policy {
	return retry.Policy{
		MaxAttempts:  attempts,
		BaseDelay:    base,
		MaxDelay:     maxDelay,
		Multiplier:   2,
		Jitter:       retry.JitterProportional,
		JitterFactor: 0.1,
	}
}

// Defaults returns seed 002's retry policy matrix: a fresh map the caller
// may change.
//
//	Category               Attempts  Base   Max    Backoff  Jitter
//	NATS_CONNECT           5         1.0s   30.0s  2.0x     ±10%
//	NATS_PUBLISH           3         0.5s   10.0s  2.0x     ±10%
//	NATS_SUBSCRIBE         3         0.5s   10.0s  2.0x     ±10%
//	NATS_STREAM_CREATE     2         2.0s   60.0s  2.0x     ±10%
//	KV_CREATE              2         1.0s   30.0s  2.0x     ±10%
//	KV_GET                 3         0.5s   10.0s  2.0x     ±10%
//	KV_PUT                 3         0.5s   10.0s  2.0x     ±10%
//	KV_DELETE              2         1.0s   30.0s  2.0x     ±10%
//	EXECUTION_INTENT       2         2.0s   60.0s  2.0x     ±10%
//	EXECUTION_CONTAINMENT  2         2.0s   60.0s  2.0x     ±10%
//	EXECUTION_EXPIRATION   1         1.0s   30.0s  2.0x     ±10%
//	APPROVAL_CHECK         3         1.0s   30.0s  2.0x     ±10%
//	APPROVAL_GRANT         2         2.0s   60.0s  2.0x     ±10%
//	REPLAY_PROCESSING      1         1.0s   30.0s  2.0x     ±10%
//	REPLAY_VALIDATION      2         1.0s   30.0s  2.0x     ±10%
//	API_REQUEST            3         1.0s   30.0s  2.0x     ±10%
//	API_VALIDATION         2         0.5s   10.0s  2.0x     ±10%
func Defaults() map[Category]retry.Policy {
	const ms = time.Millisecond
	return map[Category]retry.Policy{
		NATSConnect:          policy(5, 1000*ms, 30*time.Second),
		NATSPublish:          policy(3, 500*ms, 10*time.Second),
		NATSSubscribe:        policy(3, 500*ms, 10*time.Second),
		NATSStreamCreate:     policy(2, 2000*ms, 60*time.Second),
		KVCreate:             policy(2, 1000*ms, 30*time.Second),
		KVGet:                policy(3, 500*ms, 10*time.Second),
		KVPut:                policy(3, 500*ms, 10*time.Second),
		KVDelete:             policy(2, 1000*ms, 30*time.Second),
		ExecutionIntent:      policy(2, 2000*ms, 60*time.Second),
		ExecutionContainment: policy(2, 2000*ms, 60*time.Second),
		ExecutionExpiration:  policy(1, 1000*ms, 30*time.Second),
		ApprovalCheck:        policy(3, 1000*ms, 30*time.Second),
		ApprovalGrant:        policy(2, 2000*ms, 60*time.Second),
		ReplayProcessing:     policy(1, 1000*ms, 30*time.Second),
		ReplayValidation:     policy(2, 1000*ms, 30*time.Second),
		APIRequest:           policy(3, 1000*ms, 30*time.Second),
		APIValidation:        policy(2, 500*ms, 10*time.Second),
	}
}

// NewManager returns a retry.Manager with seed 002's matrix, followed by
// opts (which may override it).
func NewManager(opts ...retry.ManagerOption) (*retry.Manager, error) {
	return retry.NewManager(append([]retry.ManagerOption{retry.WithPolicies(Defaults())}, opts...)...)
}
