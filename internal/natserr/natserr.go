// Package natserr classifies the errors of nats.go and its jetstream
// package for the retry layer: which ones are worth retrying and what
// stable name they carry in audit events. It is shared by natsx and kvx,
// which may not import each other.
//
// The rule of thumb: an error that the same call can outgrow (a timeout, a
// reconnect, a leader election, a server that is not up yet) is transient;
// an error that only a change of configuration, credentials or code can
// fix (a bad subject, a denied permission, an unknown certificate
// authority, an invalid stream config, a CAS conflict) is permanent.
// Errors it does not know are left to the retry policy, whose default is
// to retry.
package natserr

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/retry"
)

// Verdict is what Lookup decided about an error.
type Verdict uint8

// Verdicts.
const (
	// Unknown: not a NATS error this package knows; the policy decides.
	Unknown Verdict = iota
	// Transient: retrying the same call may succeed.
	Transient
	// Permanent: retrying the same call cannot succeed.
	Permanent
)

// sentinel is one known error value.
type sentinel struct {
	err     error
	name    string
	verdict Verdict
}

// sentinels is the table of known error values, matched with errors.Is in
// this order. Order matters where one value matches another: the
// jetstream sentinels that carry an API error match any API error with the
// same err_code, so specific client-side values come before them, and
// ErrKeyRevisionMismatch (which Update wraps around a 10071 API error)
// comes before ErrKeyExists (which matches 10071).
//
// It is never modified.
var sentinels = [...]sentinel{
	// Core NATS: transient.
	{nats.ErrTimeout, "nats.ErrTimeout", Transient},
	{nats.ErrNoResponders, "nats.ErrNoResponders", Transient},
	{nats.ErrConnectionReconnecting, "nats.ErrConnectionReconnecting", Transient},
	{nats.ErrNoServers, "nats.ErrNoServers", Transient},
	{nats.ErrDisconnected, "nats.ErrDisconnected", Transient},
	{nats.ErrStaleConnection, "nats.ErrStaleConnection", Transient},
	{nats.ErrReconnectBufExceeded, "nats.ErrReconnectBufExceeded", Transient},
	{nats.ErrNoInfoReceived, "nats.ErrNoInfoReceived", Transient},
	{nats.ErrMaxConnectionsExceeded, "nats.ErrMaxConnectionsExceeded", Transient},
	{nats.ErrMaxAccountConnectionsExceeded, "nats.ErrMaxAccountConnectionsExceeded", Transient},
	{nats.ErrSlowConsumer, "nats.ErrSlowConsumer", Transient},

	// Core NATS: permanent. A closed connection never reopens and a
	// draining one is about to close, so retrying on the same *nats.Conn
	// cannot succeed: the caller must replace the connection.
	{nats.ErrConnectionClosed, "nats.ErrConnectionClosed", Permanent},
	{nats.ErrConnectionDraining, "nats.ErrConnectionDraining", Permanent},
	{nats.ErrAuthorization, "nats.ErrAuthorization", Permanent},
	{nats.ErrAuthExpired, "nats.ErrAuthExpired", Permanent},
	{nats.ErrAuthRevoked, "nats.ErrAuthRevoked", Permanent},
	{nats.ErrAccountAuthExpired, "nats.ErrAccountAuthExpired", Permanent},
	{nats.ErrPermissionViolation, "nats.ErrPermissionViolation", Permanent},
	{nats.ErrBadSubject, "nats.ErrBadSubject", Permanent},
	{nats.ErrBadQueueName, "nats.ErrBadQueueName", Permanent},
	{nats.ErrBadSubscription, "nats.ErrBadSubscription", Permanent},
	{nats.ErrTypeSubscription, "nats.ErrTypeSubscription", Permanent},
	{nats.ErrInvalidMsg, "nats.ErrInvalidMsg", Permanent},
	{nats.ErrInvalidConnection, "nats.ErrInvalidConnection", Permanent},
	{nats.ErrInvalidArg, "nats.ErrInvalidArg", Permanent},
	{nats.ErrInvalidContext, "nats.ErrInvalidContext", Permanent},
	{nats.ErrNoDeadlineContext, "nats.ErrNoDeadlineContext", Permanent},
	{nats.ErrBadTimeout, "nats.ErrBadTimeout", Permanent},
	{nats.ErrMaxPayload, "nats.ErrMaxPayload", Permanent},
	{nats.ErrMaxSubscriptionsExceeded, "nats.ErrMaxSubscriptionsExceeded", Permanent},
	{nats.ErrHeadersNotSupported, "nats.ErrHeadersNotSupported", Permanent},
	{nats.ErrBadHeaderMsg, "nats.ErrBadHeaderMsg", Permanent},
	{nats.ErrNoEchoNotSupported, "nats.ErrNoEchoNotSupported", Permanent},
	{nats.ErrNkeysNotSupported, "nats.ErrNkeysNotSupported", Permanent},
	{nats.ErrSecureConnRequired, "nats.ErrSecureConnRequired", Permanent},
	{nats.ErrSecureConnWanted, "nats.ErrSecureConnWanted", Permanent},
	{nats.ErrConnectionNotTLS, "nats.ErrConnectionNotTLS", Permanent},
	{nats.ErrMultipleTLSConfigs, "nats.ErrMultipleTLSConfigs", Permanent},
	{nats.ErrClientCertOrRootCAsRequired, "nats.ErrClientCertOrRootCAsRequired", Permanent},
	{nats.ErrUserButNoSigCB, "nats.ErrUserButNoSigCB", Permanent},
	{nats.ErrNkeyButNoSigCB, "nats.ErrNkeyButNoSigCB", Permanent},
	{nats.ErrNoUserCB, "nats.ErrNoUserCB", Permanent},
	{nats.ErrNkeyAndUser, "nats.ErrNkeyAndUser", Permanent},
	{nats.ErrTokenAlreadySet, "nats.ErrTokenAlreadySet", Permanent},
	{nats.ErrUserInfoAlreadySet, "nats.ErrUserInfoAlreadySet", Permanent},
	{nats.ErrJsonParse, "nats.ErrJsonParse", Permanent},
	{nats.ErrMsgNotBound, "nats.ErrMsgNotBound", Permanent},
	{nats.ErrMsgNoReply, "nats.ErrMsgNoReply", Permanent},

	// JetStream client-side values: transient.
	{jetstream.ErrNoHeartbeat, "jetstream.ErrNoHeartbeat", Transient},
	{jetstream.ErrNoStreamResponse, "jetstream.ErrNoStreamResponse", Transient},
	{jetstream.ErrInvalidJSAck, "jetstream.ErrInvalidJSAck", Transient},
	{jetstream.ErrAsyncPublishTimeout, "jetstream.ErrAsyncPublishTimeout", Transient},
	{jetstream.ErrServerShutdown, "jetstream.ErrServerShutdown", Transient},
	{jetstream.ErrConsumerLeadershipChanged, "jetstream.ErrConsumerLeadershipChanged", Transient},
	{jetstream.ErrTooManyStalledMsgs, "jetstream.ErrTooManyStalledMsgs", Transient},

	// JetStream client-side values: permanent.
	{jetstream.ErrConnectionClosed, "jetstream.ErrConnectionClosed", Permanent},
	{jetstream.ErrJetStreamPublisherClosed, "jetstream.ErrJetStreamPublisherClosed", Permanent},
	{jetstream.ErrKeyRevisionMismatch, "jetstream.ErrKeyRevisionMismatch", Permanent},
	{jetstream.ErrKeyNotFound, "jetstream.ErrKeyNotFound", Permanent},
	{jetstream.ErrKeyDeleted, "jetstream.ErrKeyDeleted", Permanent},
	{jetstream.ErrInvalidKey, "jetstream.ErrInvalidKey", Permanent},
	{jetstream.ErrInvalidBucketName, "jetstream.ErrInvalidBucketName", Permanent},
	{jetstream.ErrBucketExists, "jetstream.ErrBucketExists", Permanent},
	{jetstream.ErrBucketNotFound, "jetstream.ErrBucketNotFound", Permanent},
	{jetstream.ErrBadBucket, "jetstream.ErrBadBucket", Permanent},
	{jetstream.ErrKeyValueConfigRequired, "jetstream.ErrKeyValueConfigRequired", Permanent},
	{jetstream.ErrHistoryTooLarge, "jetstream.ErrHistoryTooLarge", Permanent},
	{jetstream.ErrTTLOnDeleteNotSupported, "jetstream.ErrTTLOnDeleteNotSupported", Permanent},
	{jetstream.ErrLimitMarkerTTLNotSupported, "jetstream.ErrLimitMarkerTTLNotSupported", Permanent},
	{jetstream.ErrInvalidStreamName, "jetstream.ErrInvalidStreamName", Permanent},
	{jetstream.ErrStreamNameRequired, "jetstream.ErrStreamNameRequired", Permanent},
	{jetstream.ErrInvalidSubject, "jetstream.ErrInvalidSubject", Permanent},
	{jetstream.ErrInvalidOption, "jetstream.ErrInvalidOption", Permanent},
	{jetstream.ErrStreamSubjectTransformNotSupported, "jetstream.ErrStreamSubjectTransformNotSupported", Permanent},
	{jetstream.ErrStreamSourceNotSupported, "jetstream.ErrStreamSourceNotSupported", Permanent},
	{jetstream.ErrMaxBytesExceeded, "jetstream.ErrMaxBytesExceeded", Permanent},

	// JetStream values that carry an API error (matched by err_code).
	{jetstream.ErrJetStreamNotEnabled, "jetstream.ErrJetStreamNotEnabled", Transient},
	{jetstream.ErrJetStreamNotEnabledForAccount, "jetstream.ErrJetStreamNotEnabledForAccount", Transient},
	{jetstream.ErrKeyExists, "jetstream.ErrKeyExists", Permanent},
	{jetstream.ErrStreamNameAlreadyInUse, "jetstream.ErrStreamNameAlreadyInUse", Permanent},
	{jetstream.ErrStreamNotFound, "jetstream.ErrStreamNotFound", Permanent},
	{jetstream.ErrStreamMessageExceedsMaximum, "jetstream.ErrStreamMessageExceedsMaximum", Permanent},
	{jetstream.ErrMsgNotFound, "jetstream.ErrMsgNotFound", Permanent},
	{jetstream.ErrConsumerNotFound, "jetstream.ErrConsumerNotFound", Permanent},
	{jetstream.ErrConsumerExists, "jetstream.ErrConsumerExists", Permanent},
	{jetstream.ErrConsumerDoesNotExist, "jetstream.ErrConsumerDoesNotExist", Permanent},
	{jetstream.ErrMaximumConsumersLimit, "jetstream.ErrMaximumConsumersLimit", Permanent},
	{jetstream.ErrBadRequest, "jetstream.ErrBadRequest", Permanent},
}

// apiCodes overrides the HTTP-like status of API errors that have no
// sentinel, by JetStream err_code (nats-server's errors.json). Codes not
// listed fall back to the status: 408, 409, 429 and 5xx are transient,
// other 4xx permanent.
var apiCodes = map[jetstream.ErrorCode]Verdict{
	// Cluster and availability trouble that a leader election or a node
	// coming back resolves.
	10004: Transient, // incomplete results (503)
	10005: Transient, // no suitable peers for placement (400): peers down
	10007: Transient, // cluster not assigned to this server (500)
	10008: Transient, // JetStream system temporarily unavailable (503)
	10009: Transient, // cluster can not handle request (500)
	10023: Transient, // insufficient resources (503)
	10041: Transient, // raft general error (500)
	10048: Transient, // stream assignment error (500)
	10075: Transient, // peer remap failed (503)
	10077: Transient, // stream store failed (503)
	10118: Transient, // stream is offline (500)
	10119: Transient, // consumer is offline (500)
	10158: Transient, // duplicate message id is in process (409)
	10163: Transient, // expected last sequence per subject not ready (503)
	10167: Transient, // too many requests (429)
	10194: Transient, // stream is offline: reason (500)
	10195: Transient, // consumer is offline: reason (500)
	10202: Transient, // cluster member change in progress (400)
	10210: Transient, // atomic publish too many inflight (429)
	10211: Transient, // batch publish too many inflight (429)

	// Configuration and limits that only a change on the caller's or
	// operator's side fixes, although some are reported as 5xx.
	10002: Permanent, // account resource limits exceeded (400)
	10006: Permanent, // JetStream not in clustered mode (500)
	10010: Permanent, // clustering support required (503)
	10028: Permanent, // insufficient memory resources (500)
	10035: Permanent, // account not found (503)
	10036: Permanent, // not supported in clustered mode (503)
	10047: Permanent, // insufficient storage resources (500)
	10052: Permanent, // stream configuration invalid (500)
	10053: Permanent, // stream limits error (500)
	10063: Permanent, // expected stream sequence does not match (503)
	10071: Permanent, // wrong last sequence (400)
	10074: Permanent, // replicas > 1 not supported in non-clustered mode (500)
	10096: Permanent, // stream not valid (500)
	10117: Permanent, // subject details would exceed maximum (500)
	10164: Permanent, // wrong last sequence, replicated streams (400)
}

// Lookup returns the stable name of err (for audit events and the
// error.type attribute) and whether it is transient or permanent. It walks
// err's chain, so wrapped errors are found. It returns "", Unknown for
// errors it does not know, and for nil.
func Lookup(err error) (name string, v Verdict) {
	if err == nil {
		return "", Unknown
	}
	for i := range sentinels {
		if errors.Is(err, sentinels[i].err) {
			return sentinels[i].name, sentinels[i].verdict
		}
	}
	if apiErr, ok := apiError(err); ok {
		return "jetstream.APIError(" + strconv.Itoa(int(apiErr.ErrorCode)) + ")", apiVerdict(apiErr)
	}
	if name, ok := tlsError(err); ok {
		return name, Permanent
	}
	// Errors that carry the server's words but not the sentinel, such as
	// the -ERR text of a permission or authorization failure.
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, nats.PERMISSIONS_ERR):
		return "nats.ErrPermissionViolation", Permanent
	case strings.Contains(msg, nats.AUTHORIZATION_ERR):
		return "nats.ErrAuthorization", Permanent
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// An attempt's deadline: the next attempt gets a new one.
		return "context.DeadlineExceeded", Transient
	case errors.Is(err, nats.ErrTLS):
		// A TLS failure that is not about certificates, such as the
		// peer closing after the handshake: left to the policy.
		return "nats.ErrTLS", Unknown
	}
	return "", Unknown
}

// Name returns Lookup's name for err, or "".
func Name(err error) string {
	n, _ := Lookup(err)
	return n
}

// ErrorType names err for audit events and the error.type attribute:
// Lookup's name for a known nats.go or JetStream error, else
// retry.ErrorType. natsx.Error and kvx.Error both answer with it.
func ErrorType(err error) string {
	if n := Name(err); n != "" {
		return n
	}
	return retry.ErrorType(err)
}

// IsPermanent reports whether Lookup finds err permanent.
func IsPermanent(err error) bool {
	_, v := Lookup(err)
	return v == Permanent
}

// apiError returns the JetStream API error in err's chain, if any.
func apiError(err error) (*jetstream.APIError, bool) {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr != nil {
		return apiErr, true
	}
	var jsErr jetstream.JetStreamError
	if errors.As(err, &jsErr) {
		if a := jsErr.APIError(); a != nil {
			return a, true
		}
	}
	return nil, false
}

// apiVerdict classifies an API error without a sentinel.
func apiVerdict(e *jetstream.APIError) Verdict {
	if v, ok := apiCodes[e.ErrorCode]; ok {
		return v
	}
	switch {
	case e.Code == 408 || e.Code == 409 || e.Code == 429 || e.Code >= 500:
		return Transient
	case e.Code >= 400:
		return Permanent
	}
	return Unknown
}

// tlsError names certificate and TLS protocol errors. They are permanent:
// an unknown authority, a wrong host name, an expired certificate or a
// server that does not speak TLS stay so until someone changes the
// configuration.
func tlsError(err error) (string, bool) {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
		alert            tls.AlertError
		record           tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknownAuthority):
		return "x509.UnknownAuthorityError", true
	case errors.As(err, &hostname):
		return "x509.HostnameError", true
	case errors.As(err, &invalid):
		return "x509.CertificateInvalidError", true
	case errors.As(err, &verify):
		return "tls.CertificateVerificationError", true
	case errors.As(err, &alert):
		return "tls.AlertError", true
	case errors.As(err, &record):
		return "tls.RecordHeaderError", true
	}
	return "", false
}
