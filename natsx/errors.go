package natsx

import (
	"errors"
	"strings"

	"github.com/jetretry/jetretry/internal/natserr"
	"github.com/jetretry/jetretry/retry"
)

var (
	_ retry.ErrorTyper = (*Error)(nil)
	_ error            = (*ConfigError)(nil)
)

// Error is a failed NATS operation. It wraps the nats.go or jetstream error
// unchanged, so errors.Is(err, nats.ErrTimeout) and
// errors.As(err, &apiErr) keep working, and it names that error for audit
// events and telemetry (see ErrorType).
type Error struct {
	// Op is the operation: "connect", "publish", "request", "subscribe",
	// "jetstream publish" or "create stream". Empty for errors wrapped by
	// Classify.
	Op string
	// Target is what the operation addressed: a subject, a stream name or
	// a server URL (without credentials). It may be empty.
	Target string
	// Err is the underlying error.
	Err error
}

// Error returns "natsx: <op> <target>: <err>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("natsx: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		if e.Target != "" {
			b.WriteString(" ")
			b.WriteString(quoteTarget(e.Target))
		}
		b.WriteString(": ")
	}
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
// and the error.type attribute: the exported name of a known nats.go or
// jetstream value, such as "nats.ErrTimeout" or
// "jetstream.ErrStreamNameAlreadyInUse"; "jetstream.APIError(<err_code>)"
// for other JetStream API errors; the x509 or tls type of a certificate
// error; otherwise retry.ErrorType of the underlying error.
func (e *Error) ErrorType() string {
	return natserr.ErrorType(e.Err)
}

func quoteTarget(s string) string {
	if strings.ContainsAny(s, " \t\r\n\"") || s == "" {
		return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
	}
	return s
}

// ErrInvalidConfig matches every *ConfigError: a ConnectConfig, client or
// argument that cannot work, reported before anything is sent.
var ErrInvalidConfig = errors.New("natsx: invalid config")

// ConfigError reports a bad ConnectConfig field, a bad option or a client
// not created with New. It matches ErrInvalidConfig.
type ConfigError struct {
	// Field names the offending field or argument, e.g. "Token".
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is the underlying error, if any (a missing file, a bad seed).
	Err error
}

// Error returns "natsx: invalid config: <field> <reason>[: <err>]".
func (e *ConfigError) Error() string {
	s := "natsx: invalid config: " + e.Field + " " + e.Reason
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Is makes a ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Unwrap returns the underlying error.
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrorType returns "natsx.ConfigError".
func (e *ConfigError) ErrorType() string { return "natsx.ConfigError" }

// Classify prepares err, returned by nats.go or its jetstream package, for
// retry.Do: it wraps err in an *Error (unless one is already in its chain)
// so that audit events name it, and marks it retry.Permanent when no retry
// can fix it. Transient errors are left unmarked, so the policy's matchers
// still apply to them (and retry them by default). Errors that already
// carry a retry mark are returned unchanged. Classify(nil) is nil.
//
// Transient: nats.ErrTimeout, ErrNoResponders (no JetStream yet, a leader
// election), ErrConnectionReconnecting, ErrNoServers, ErrDisconnected,
// ErrStaleConnection, ErrReconnectBufExceeded, ErrMaxConnectionsExceeded,
// ErrSlowConsumer; jetstream.ErrNoHeartbeat, ErrNoStreamResponse,
// ErrJetStreamNotEnabled(ForAccount); JetStream API errors with status
// 408, 409, 429 or 5xx and the cluster-availability codes (10004, 10005,
// 10008, 10009, 10023, ...); an attempt's context.DeadlineExceeded.
//
// Permanent: nats.ErrAuthorization, ErrAuthExpired, ErrAuthRevoked,
// ErrPermissionViolation (and "permissions violation" texts),
// ErrBadSubject, ErrBadQueueName, ErrInvalidMsg, ErrMaxPayload,
// ErrInvalidConnection, ErrConnectionClosed and ErrConnectionDraining (a
// closed connection never reopens: replace it), ErrSecureConnRequired and
// the other option errors; certificate and TLS protocol errors (x509 and
// tls types); jetstream.ErrStreamNameAlreadyInUse, ErrStreamNotFound,
// ErrKeyExists, ErrKeyRevisionMismatch, ErrKeyNotFound, ErrInvalidKey and
// the other invalid-argument values; JetStream API errors with status 4xx
// and the configuration codes reported as 5xx (10052 invalid stream
// config, 10074 replicas not supported, ...).
//
// Anything else (a *net.OpError, an unknown error) is left to the policy.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if retry.IsPermanent(err) {
		return err
	}
	if _, ok := retry.RetryAfter(err); ok {
		return err
	}
	var e *Error
	if !errors.As(err, &e) {
		err = &Error{Err: err}
	}
	if natserr.IsPermanent(err) {
		return retry.Permanent(err)
	}
	return err
}

// fail wraps err from operation op on target and classifies it.
func fail(op, target string, err error) error {
	return Classify(&Error{Op: op, Target: target, Err: err})
}
