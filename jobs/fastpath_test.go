package jobs

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

func TestParsePubAck(t *testing.T) {
	seq, err := parsePubAck([]byte(`{"stream":"KV_jobs","seq":42}`))
	require.NoError(t, err)
	require.Equal(t, uint64(42), seq)

	seq, err = parsePubAck([]byte(`{"stream":"KV_jobs", "domain":"hub", "seq": 7, "duplicate":true}`))
	require.NoError(t, err)
	require.Equal(t, uint64(7), seq)

	_, err = parsePubAck([]byte(`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 5"},"stream":"KV_jobs","seq":0}`))
	var apiErr *jetstream.APIError
	require.True(t, errors.As(err, &apiErr))
	require.Equal(t, jetstream.JSErrCodeStreamWrongLastSequence, apiErr.ErrorCode)
	require.True(t, isConflict(err), "a wrong last sequence is a compare-and-set conflict")

	for _, bad := range []string{``, `{}`, `{"stream":"KV_jobs"}`, `{"seq":-1}`, `{"seq":"3"}`, `{"seq":3`, `[1]`, `{"error":7}`} {
		_, err := parsePubAck([]byte(bad))
		require.ErrorIs(t, err, jetstream.ErrInvalidJetStreamResponse, "%q", bad)
	}
}
