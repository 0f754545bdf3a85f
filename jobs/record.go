package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"time"

	"github.com/jetretry/jetretry/retry"
)

// RecordVersion is the version of the job record JSON written by this
// package. Records of another version are refused as corrupt.
const RecordVersion = 1

// MaxHistory is the number of runs a record keeps; older runs are dropped
// and counted in Record.HistoryDropped.
const MaxHistory = 50

// Status is a job's state.
type Status string

// Job statuses (seed 003).
const (
	// StatusPending: waiting for a worker, now or after a backoff.
	StatusPending Status = "pending"
	// StatusRunning: a worker holds a lease on it.
	StatusRunning Status = "running"
	// StatusSuccess: a run succeeded; CurrentRunID names it.
	StatusSuccess Status = "success"
	// StatusFailed: failed; a failed job is terminal and leaves this
	// status only through Requeue.
	StatusFailed Status = "failed"
)

// ErrorClass classifies a failed run (seed 004, plus crashed).
type ErrorClass string

// Error classes.
const (
	ClassFinal       ErrorClass = "final"
	ClassRetryable   ErrorClass = "retryable"
	ClassRateLimited ErrorClass = "rate_limited"
	// ClassCrashed: the run's worker lost its lease (presumed dead).
	ClassCrashed ErrorClass = "crashed"
	// ClassCancelled: the run was cancelled (Cancel, or its worker shut
	// down and handed the job back).
	ClassCancelled ErrorClass = "cancelled"
)

// TerminalReason says why a job was designated terminal.
type TerminalReason string

// Terminal reasons (seed 003: attempts, age, or a manual marker).
const (
	TerminalMaxAttempts TerminalReason = "max_attempts"
	TerminalMaxAge      TerminalReason = "max_age"
	TerminalFinal       TerminalReason = "final"
	TerminalManual      TerminalReason = "manual"
)

// Outcome is how a run ended.
type Outcome string

// Run outcomes.
const (
	OutcomeSuccess   Outcome = "success"
	OutcomeFailed    Outcome = "failed"
	OutcomeCrashed   Outcome = "crashed"
	OutcomeCancelled Outcome = "cancelled"
)

// Run is one execution of a job. Runs are never modified once ended.
type Run struct {
	RunID     string `json:"run_id"`
	Owner     string `json:"owner,omitempty"`
	Attempt   int    `json:"attempt"`
	Reprocess bool   `json:"reprocess,omitempty"`
	// StartedAt is when the run claimed the job; a job claimed ahead
	// (WorkerConfig.Prefetch) waits for a slot before its handler runs.
	StartedAt  time.Time  `json:"started_at"`
	LeaseUntil time.Time  `json:"lease_until,omitzero"`
	EndedAt    time.Time  `json:"ended_at,omitzero"`
	Outcome    Outcome    `json:"outcome,omitempty"`
	Error      string     `json:"error,omitempty"`
	ErrorType  string     `json:"error_type,omitempty"`
	ErrorClass ErrorClass `json:"error_class,omitempty"`
}

// Record is the state of one job, stored as JSON in the jobs bucket under
// its ID. It is a plain value; copies share Payload, History and Policy.
type Record struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Queue   string `json:"queue"`
	Key     string `json:"key"`
	Payload []byte `json:"payload,omitempty"`
	Status  Status `json:"status"`
	// AttemptCount counts every execution; it never decreases.
	AttemptCount int `json:"attempt_count"`
	// BudgetUsed counts the failures charged to the retry budget: not
	// rate-limited ones. Requeue and Reprocess reset it.
	BudgetUsed int `json:"budget_used"`
	// CurrentRunID is the run whose success is current, or "".
	CurrentRunID string `json:"current_run_id,omitempty"`
	// Dispatch is the token the next valid dispatch message carries.
	Dispatch string `json:"dispatch,omitempty"`
	// Run is the run in progress while Status is running.
	Run            *Run           `json:"run,omitempty"`
	LastError      string         `json:"last_error,omitempty"`
	ErrorClass     ErrorClass     `json:"error_class,omitempty"`
	NextRetryAt    time.Time      `json:"next_retry_at,omitzero"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	Terminal       bool           `json:"terminal"`
	TerminalReason TerminalReason `json:"terminal_reason,omitempty"`
	// Reprocess is set while an operator-requested rerun of a success is
	// pending or running.
	Reprocess      bool  `json:"reprocess,omitempty"`
	History        []Run `json:"history,omitempty"`
	HistoryDropped int   `json:"history_dropped,omitempty"`
	// Policy overrides the worker's policy for this job. Its matchers are
	// not stored: classification uses marks (retry.Permanent,
	// retry.RateLimited) and the worker policy's matchers.
	Policy *retry.Policy `json:"policy,omitempty"`
}

// ID returns the bucket key of the job with logical key key: the first 32
// hex digits of its SHA-256, a valid KV key and subject token.
func ID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

var validQueue = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func checkQueue(queue string) error {
	if !validQueue.MatchString(queue) {
		return fmt.Errorf("%w: queue name %q: use 1 to 64 letters, digits, '-' and '_'", ErrInvalidConfig, queue)
	}
	return nil
}

func (r *Record) encode() ([]byte, error) {
	r.Version = RecordVersion
	if b, ok := appendRecord(make([]byte, 0, 512+len(r.Payload)*4/3+len(r.History)*256), r); ok {
		return b, nil
	}
	return json.Marshal(r)
}

// CorruptRecordError says that the record at ID and Revision cannot be
// decoded. It matches ErrCorrupt.
type CorruptRecordError struct {
	ID       string
	Revision uint64
	Err      error
}

func (e *CorruptRecordError) Error() string {
	return fmt.Sprintf("jobs: corrupt record %s at revision %d: %v", e.ID, e.Revision, e.Err)
}

// Is reports whether target is ErrCorrupt.
func (e *CorruptRecordError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns the decoding error.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

func decodeRecord(id string, rev uint64, b []byte) (Record, error) {
	var r Record
	if !decodeRecordFast(b, &r) {
		r = Record{}
		if err := json.Unmarshal(b, &r); err != nil {
			return Record{}, &CorruptRecordError{ID: id, Revision: rev, Err: err}
		}
	}
	switch {
	case r.Version != RecordVersion:
		return Record{}, &CorruptRecordError{ID: id, Revision: rev, Err: fmt.Errorf("unknown version %d", r.Version)}
	case r.Key == "" || r.Queue == "" || r.ID != id:
		return Record{}, &CorruptRecordError{ID: id, Revision: rev, Err: fmt.Errorf("missing key, queue or id")}
	}
	switch r.Status {
	case StatusPending, StatusSuccess, StatusFailed:
	case StatusRunning:
		if r.Run == nil {
			return Record{}, &CorruptRecordError{ID: id, Revision: rev, Err: fmt.Errorf("running without a run")}
		}
	default:
		return Record{}, &CorruptRecordError{ID: id, Revision: rev, Err: fmt.Errorf("unknown status %q", r.Status)}
	}
	return r, nil
}

// dispatchMsg is the body of a dispatch message. A fresh job's dispatch
// also carries the job, so that a worker that gets it before the
// submit's record is written (or after that write failed) creates the
// record itself; a job whose dispatch is stored always runs. Dispatches of
// retries, requeues and reprocesses carry only the key and token.
type dispatchMsg struct {
	Key   string   `json:"key"`
	Token string   `json:"token"`
	Job   *jobSpec `json:"job,omitempty"`
}

// jobSpec is what a fresh job's record is built from.
type jobSpec struct {
	Queue     string        `json:"queue"`
	Payload   []byte        `json:"payload,omitempty"`
	Policy    *retry.Policy `json:"policy,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
}

// newRecord is the record of a fresh job: pending, to be run by the
// dispatch carrying token.
func newRecord(key, token string, s jobSpec) Record {
	return Record{
		Version: RecordVersion, ID: ID(key), Queue: s.Queue, Key: key, Payload: s.Payload,
		Status: StatusPending, Dispatch: token, CreatedAt: s.CreatedAt, UpdatedAt: s.CreatedAt,
		Policy: s.Policy,
	}
}

// addHistory appends run to the history, dropping the oldest runs beyond
// MaxHistory. It copies the slice, so earlier copies of r are unchanged.
func (r *Record) addHistory(run Run) {
	h := make([]Run, 0, min(len(r.History)+1, MaxHistory))
	drop := len(r.History) + 1 - MaxHistory
	if drop < 0 {
		drop = 0
	}
	r.HistoryDropped += drop
	h = append(h, r.History[drop:]...)
	r.History = append(h, run)
}
