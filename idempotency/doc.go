// Package idempotency makes operations run at most once per logical
// request.
//
// A request is identified by its key: Key derives it deterministically from
// the operation name, tenant, correlation ID and parameters, as the SHA-256
// of their RFC 8785 (JCS) canonical JSON, so that services written in any
// language compute the same key for the same request (testdata/README.md
// gives the derivation and test vectors). Fingerprint hashes a payload the
// same way, so a key reused for a different payload can be detected.
//
// A Store records, per key, whether the operation is in progress, completed
// (with its result) or failed. Memory is an in-process Store.
package idempotency
