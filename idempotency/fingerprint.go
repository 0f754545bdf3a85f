package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/jetretry/jetretry/internal/jcs"
)

// Fingerprint returns the lowercase hex SHA-256 of the RFC 8785 canonical
// JSON of v, for detecting a key reused with a different payload. Payloads
// that are equal as JSON data (same members in any order, 1.0 versus 1)
// have equal fingerprints. v may be any value Canonical accepts as params,
// including a json.RawMessage, which is re-canonicalized.
//
// It returns an error wrapping ErrInvalidParams when v has no canonical JSON
// form.
func Fingerprint(v any) (string, error) {
	canon, err := jcs.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%w: fingerprint: %w", ErrInvalidParams, err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}
