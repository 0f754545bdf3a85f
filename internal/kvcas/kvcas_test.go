package kvcas

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestIsConflict(t *testing.T) {
	for _, err := range []error{
		jetstream.ErrKeyExists,
		fmt.Errorf("update: %w", jetstream.ErrKeyRevisionMismatch),
		&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence},
		fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}),
	} {
		require.True(t, IsConflict(err), "%v", err)
	}
	for _, err := range []error{
		nil, errors.New("wrong last sequence"), jetstream.ErrKeyNotFound,
		&jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeStreamNotFound},
	} {
		require.False(t, IsConflict(err), "%v", err)
	}
}
