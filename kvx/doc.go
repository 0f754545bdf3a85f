// Package kvx runs JetStream key-value operations under retry.Do, each in
// its seed 002 retry category, so that their retries are bounded,
// classified and audited:
//
//	CreateBucket                        RETRY_KV_CREATE (bucket creation)
//	Get                                 RETRY_KV_GET
//	Put, Create, Update                 RETRY_KV_PUT (every key write)
//	Delete, DeleteRevision              RETRY_KV_DELETE
//
// Errors are classified with the rules of natsx.Classify: timeouts, no
// responders and cluster unavailability are retried; invalid keys, a
// missing bucket, CAS conflicts and the like are permanent. Each is
// wrapped in an *Error that names it for audit events and keeps the
// jetstream error for errors.Is (jetstream.ErrKeyNotFound,
// jetstream.ErrKeyExists, jetstream.ErrKeyRevisionMismatch).
//
// # Retrying writes safely
//
// A write whose ack is lost may have landed. Retrying it blindly would
// turn a success into a false conflict for the compare-and-set writes, so
// on second and later attempts they check: a Create that finds the key
// holding exactly its value, and an Update (or DeleteRevision) that finds
// its value (or delete marker) as the revision that followed the expected
// one, report success with that revision. Put and Delete are idempotent
// in effect and are simply repeated.
//
// A missing key is an answer, not a failure: Get does not retry it and
// emits no retry_exhausted event for it.
package kvx
