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
// (with its result) or failed. The flow is: Claim the key; run the
// operation while renewing the claim's lease; then Complete with the result,
// or Release (or Fail) on failure. A claim whose lease ends without a
// result is an orphan, and the next Claim takes it over. Every store passes
// the conformance suite in package storetest.
//
// Memory is an in-process Store. KV is a durable Store on a JetStream KV
// bucket (JETRETRY_IDEMPOTENCY by default), shared by every process that
// uses the bucket. Each key holds one versioned JSON record, readable with
// `nats kv get`:
//
//	{"v":1,"state":"in_progress","owner":"<uuid>","lease_until":"<RFC 3339>",
//	 "fingerprint":"<hex>","created_at":"<RFC 3339>","updated_at":"<RFC 3339>"}
//	{"v":1,"state":"completed","fingerprint":"<hex>","result":<JSON>,...}
//	{"v":1,"state":"failed","fingerprint":"<hex>","failure":"<message>",...}
//
// Leases are enforced from lease_until against the store's clock, not by
// per-key TTLs (a write resets those); the bucket's TTL is the retention of
// records. A record the KV store cannot decode is reported as ErrCorrupt and
// blocks its key until an operator clears it.
//
// Both stores implement Waiter: a caller that finds a key in progress can
// wait for the owner's result instead of failing (retry.WaitForResult).
package idempotency
