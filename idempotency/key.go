package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/jetretry/jetretry/internal/jcs"
)

// ErrInvalidParams is returned, wrapped, by Key and Canonical when the
// params have no canonical JSON form: they hold a NaN or infinite float, an
// integer a double cannot hold exactly (beyond ±2^53 unless its canonical
// text is exact), a string or key that is not valid UTF-8, a value that
// encoding/json cannot marshal, or nesting deeper than 1000 levels.
var ErrInvalidParams = errors.New("idempotency: invalid params")

// Key returns the idempotency key of an operation: the lowercase hex
// SHA-256 of Canonical(operation, tenantID, correlationID, params). It is 64
// characters long, a valid NATS KV key, and reproducible in any language
// (see testdata/README.md). Equal inputs give equal keys however params was
// built; in particular the order of map entries does not matter.
//
// It returns an error wrapping ErrInvalidParams when params cannot be
// canonicalized or operation, tenantID or correlationID is not valid UTF-8.
func Key(operation, tenantID, correlationID string, params map[string]any) (string, error) {
	canon, err := Canonical(operation, tenantID, correlationID, params)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// Canonical returns the RFC 8785 canonical JSON that Key hashes:
//
//	{"additional_params":PARAMS,"correlation_id":CORRELATION_ID,"operation":OPERATION,"tenant_id":TENANT_ID}
//
// Empty strings stay empty strings and nil params become {}. Params values
// may be nil, bool, string, any Go integer or float, json.Number, []any,
// []string, map[string]any, map[string]string, or anything else that
// encoding/json marshals; numbers are written as RFC 8785 doubles (so 1.0
// and 1 are the same parameter). Decode JSON params with
// json.Decoder.UseNumber so large integers are not rounded before Key sees
// them.
//
// It returns an error wrapping ErrInvalidParams when params cannot be
// canonicalized or operation, tenantID or correlationID is not valid UTF-8.
func Canonical(operation, tenantID, correlationID string, params map[string]any) ([]byte, error) {
	for _, f := range [...]struct{ name, value string }{
		{"operation", operation},
		{"tenant ID", tenantID},
		{"correlation ID", correlationID},
	} {
		if !utf8.ValidString(f.value) {
			return nil, fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidParams, f.name)
		}
	}
	if params == nil {
		params = map[string]any{}
	}
	canon, err := jcs.Marshal(map[string]any{
		"additional_params": params,
		"correlation_id":    correlationID,
		"operation":         operation,
		"tenant_id":         tenantID,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	return canon, nil
}
