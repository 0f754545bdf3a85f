// Package jobs runs durable jobs (seeds 003 and 004): work identified by a
// logical key that any worker of a fleet runs, retries with backoff held
// by the JetStream server, and recovers after crashes.
//
// # Storage
//
//   - KV bucket JETRETRY_JOBS: one JSON Record per job, under ID(key) (a
//     SHA-256 prefix of the logical key, which the record keeps).
//   - Stream JETRETRY_JOBS_WORK (work-queue retention, AllowMsgSchedules):
//     dispatch messages {key, token} on jetretry.jobs.<queue>.run (a fresh
//     job's dispatch also carries the job: queue, payload, policy,
//     created_at), and one
//     schedule subject per job, jetretry.jobs.<queue>.sched.<id>, whose
//     one-shot schedule delivers the next retry's dispatch to the run
//     subject at next_retry_at. A new schedule on the subject replaces the
//     old one. Delayed retries are held by the server; workers read only
//     the run subject, where fresh jobs and due retries queue together in
//     arrival order.
//   - Stream JETRETRY_JOBS_DLQ (limits retention): jetretry.dlq.<queue>
//     holds each terminally failed job's record with its run history.
//
// # Protocol
//
// Submit sends the dispatch and the record's create together (one round
// trip). A worker that gets a fresh job's dispatch before its record
// exists writes the record from the dispatch, so a job whose dispatch is
// stored always runs; a record whose dispatch was lost (its publish
// failed) is dispatched again by the next Submit of its key, or by Kick.
// Sweep finds every pending job whose dispatch is gone (a control call
// that died between its two writes, a purged stream) and dispatches it
// again; workers can sweep their queue by themselves
// (WorkerConfig.SweepEvery).
//
// A record names the dispatch token that the next valid dispatch message
// carries; other dispatches are stale and dropped. A worker claims a job
// by a compare-and-set on its record (status running, a new UUIDv7
// run_id, attempt_count+1, a lease), renews the lease every third of it
// while the handler runs (a renewal that finds the record changed cancels
// the handler's context), and writes the outcome by compare-and-set:
// success, a retry (pending, a new token, next_retry_at; then the schedule
// is published), or a terminal failure (dead letter and retry_exhausted).
// A worker's claimers read and claim jobs ahead of its slots
// (WorkerConfig.Prefetch), keeping the leases of claimed jobs that wait
// for a slot, so a slot runs one handler after another without waiting for
// the server; the outcome is written off the slot, which takes its next
// job meanwhile. The dispatch message is acknowledged only after that; a
// worker that dies leaves it unacknowledged, so it is redelivered after
// the lease, and the next worker records the dead run as crashed and runs
// the job again.
//
// A run whose lease cannot be renewed in time (the server unreachable)
// is fenced: its handler's context ends a tenth of a lease before the
// lease does, so no other worker takes the job over while it runs. Jobs
// are run at least once: a handler that succeeded while its outcome could
// not be written (an outage longer than the lease) runs again elsewhere.
// Give handlers with side effects an idempotency key (retry.Do with
// retry.WithIdempotencyKey, derived from Job.Key) for exactly-once effects.
//
// The decisions are pure functions of a record, an outcome and the time;
// see decide.go.
//
// # Error classes
//
// retry.Permanent is final: failed and terminal. retry.RateLimited(err, d)
// retries after d (clamped to the policy's MaxDelay) without using the
// budget. Other errors are classified by the worker's policy: retryable
// ones use the budget and back off (default 8 attempts, 60 s, ×2, 3600 s,
// ±10%). A crashed run uses the budget too, so a job that kills its
// workers ends; that includes the runs a dead worker had claimed ahead
// and not started (at most Prefetch of them). Delays are rounded up to whole seconds, the granularity of
// schedules.
//
// Only Requeue leads out of failed. Reprocess reruns a success: if the
// rerun fails for good the earlier success stays current.
package jobs
