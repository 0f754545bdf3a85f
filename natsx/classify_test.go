package natsx_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

func apiErr(status, code int) error {
	return fmt.Errorf("nats: %w", &jetstream.APIError{Code: status, ErrorCode: jetstream.ErrorCode(code), Description: "test"})
}

func TestClassify(t *testing.T) {
	certErr := &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}
	tests := []struct {
		name      string
		err       error
		permanent bool
		typ       string
	}{
		// transient
		{"timeout", nats.ErrTimeout, false, "nats.ErrTimeout"},
		{"no responders", nats.ErrNoResponders, false, "nats.ErrNoResponders"},
		{"reconnecting", nats.ErrConnectionReconnecting, false, "nats.ErrConnectionReconnecting"},
		{"no servers", nats.ErrNoServers, false, "nats.ErrNoServers"},
		{"disconnected", nats.ErrDisconnected, false, "nats.ErrDisconnected"},
		{"stale connection", nats.ErrStaleConnection, false, "nats.ErrStaleConnection"},
		{"reconnect buffer", nats.ErrReconnectBufExceeded, false, "nats.ErrReconnectBufExceeded"},
		{"max connections", nats.ErrMaxConnectionsExceeded, false, "nats.ErrMaxConnectionsExceeded"},
		{"no heartbeat", jetstream.ErrNoHeartbeat, false, "jetstream.ErrNoHeartbeat"},
		{"no stream response", jetstream.ErrNoStreamResponse, false, "jetstream.ErrNoStreamResponse"},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, false, "jetstream.ErrJetStreamNotEnabled"},
		{"jetstream not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, false, "jetstream.ErrJetStreamNotEnabledForAccount"},
		{"api 503 not enabled", apiErr(503, 10076), false, "jetstream.ErrJetStreamNotEnabled"},
		{"api 503 temporarily unavailable", apiErr(503, 10008), false, "jetstream.APIError(10008)"},
		{"api 500 not leader", apiErr(500, 10009), false, "jetstream.APIError(10009)"},
		{"api 400 no peers", apiErr(400, 10005), false, "jetstream.APIError(10005)"},
		{"api 429 too many requests", apiErr(429, 10167), false, "jetstream.APIError(10167)"},
		{"api unknown 503", apiErr(503, 19999), false, "jetstream.APIError(19999)"},
		{"attempt deadline", context.DeadlineExceeded, false, "context.DeadlineExceeded"},
		{"wrapped timeout", fmt.Errorf("flush: %w", nats.ErrTimeout), false, "nats.ErrTimeout"},

		// permanent
		{"authorization", nats.ErrAuthorization, true, "nats.ErrAuthorization"},
		{"authorization -ERR text", errors.New("nats: Authorization Violation"), true, "nats.ErrAuthorization"},
		{"auth expired", nats.ErrAuthExpired, true, "nats.ErrAuthExpired"},
		{"auth revoked", nats.ErrAuthRevoked, true, "nats.ErrAuthRevoked"},
		{"permission violation", fmt.Errorf("%w: Permissions Violation for Publish to \"x\"", nats.ErrPermissionViolation), true, "nats.ErrPermissionViolation"},
		{"permission violation text", errors.New(`nats: permissions violation for subscription to "x"`), true, "nats.ErrPermissionViolation"},
		{"bad subject", nats.ErrBadSubject, true, "nats.ErrBadSubject"},
		{"bad queue", nats.ErrBadQueueName, true, "nats.ErrBadQueueName"},
		{"invalid msg", nats.ErrInvalidMsg, true, "nats.ErrInvalidMsg"},
		{"max payload", nats.ErrMaxPayload, true, "nats.ErrMaxPayload"},
		{"invalid connection", nats.ErrInvalidConnection, true, "nats.ErrInvalidConnection"},
		{"connection closed", nats.ErrConnectionClosed, true, "nats.ErrConnectionClosed"},
		{"connection draining", nats.ErrConnectionDraining, true, "nats.ErrConnectionDraining"},
		{"secure connection required", nats.ErrSecureConnRequired, true, "nats.ErrSecureConnRequired"},
		{"no deadline", nats.ErrNoDeadlineContext, true, "nats.ErrNoDeadlineContext"},
		{"stream name in use", jetstream.ErrStreamNameAlreadyInUse, true, "jetstream.ErrStreamNameAlreadyInUse"},
		{"stream name in use from server", apiErr(400, 10058), true, "jetstream.ErrStreamNameAlreadyInUse"},
		{"stream not found", jetstream.ErrStreamNotFound, true, "jetstream.ErrStreamNotFound"},
		{"invalid stream config (500)", apiErr(500, 10052), true, "jetstream.APIError(10052)"},
		{"replicas not supported (500)", apiErr(500, 10074), true, "jetstream.APIError(10074)"},
		{"subjects overlap (400)", apiErr(400, 10065), true, "jetstream.APIError(10065)"},
		{"key exists", jetstream.ErrKeyExists, true, "jetstream.ErrKeyExists"},
		{"key revision mismatch", fmt.Errorf("%w: %w", apiErr(400, 10071), jetstream.ErrKeyRevisionMismatch), true, "jetstream.ErrKeyRevisionMismatch"},
		{"key not found", jetstream.ErrKeyNotFound, true, "jetstream.ErrKeyNotFound"},
		{"invalid key", jetstream.ErrInvalidKey, true, "jetstream.ErrInvalidKey"},
		{"bucket exists", jetstream.ErrBucketExists, true, "jetstream.ErrBucketExists"},
		{"unknown authority", fmt.Errorf("%w: %w", nats.ErrTLS, certErr), true, "x509.UnknownAuthorityError"},
		{"hostname", x509.HostnameError{Host: "x"}, true, "x509.HostnameError"},
		{"expired certificate", x509.CertificateInvalidError{Reason: x509.Expired}, true, "x509.CertificateInvalidError"},
		{"tls alert", fmt.Errorf("%w: %w", nats.ErrTLS, tls.AlertError(42)), true, "tls.AlertError"},
		{"not tls", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true, "tls.RecordHeaderError"},

		// unknown: left to the policy (retried by default)
		{"net error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false, "*net.OpError"},
		{"eof", io.EOF, false, "*errors.errorString"},
		{"tls closed after handshake", fmt.Errorf("%w: connection closed by remote after TLS handshake: %w", nats.ErrTLS, io.EOF), false, "nats.ErrTLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := natsx.Classify(tt.err)
			require.ErrorIs(t, got, tt.err, "the original error stays matchable")
			require.Equal(t, tt.permanent, retry.IsPermanent(got))
			var e *natsx.Error
			require.ErrorAs(t, got, &e)
			require.Equal(t, tt.typ, retry.ErrorType(got))

			// The policy sees the same thing.
			p := retry.DefaultPolicy()
			class, _ := p.Classify(got)
			want := retry.ClassRetryable
			if tt.permanent {
				want = retry.ClassPermanent
			}
			require.Equal(t, want, class)
		})
	}
}

func TestClassifyKeepsMarksAndWrappers(t *testing.T) {
	require.NoError(t, natsx.Classify(nil))

	marked := retry.Permanent(nats.ErrTimeout)
	require.Same(t, marked, natsx.Classify(marked), "an explicit mark wins")

	limited := retry.RateLimited(nats.ErrTimeout, time.Second)
	require.Same(t, limited, natsx.Classify(limited))

	own := &natsx.Error{Op: "publish", Target: "a.b", Err: nats.ErrTimeout}
	require.Same(t, own, natsx.Classify(own), "an *Error is not wrapped twice")
	require.Equal(t, "natsx: publish a.b: nats: timeout", own.Error())

	wrapped := natsx.Classify(nats.ErrMaxPayload)
	require.Equal(t, "natsx: nats: maximum payload exceeded", wrapped.Error())
}
