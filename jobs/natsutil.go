package jobs

import (
	"github.com/nats-io/nats.go"

	"github.com/jetretry/jetretry/internal/kvcas"
)

var errFetchTimeout = nats.ErrTimeout

// isConflict reports whether err is a compare-and-set conflict.
func isConflict(err error) bool { return kvcas.IsConflict(err) }
