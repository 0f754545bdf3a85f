package idempotency

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// kvRecordVersion is the version of the record format the KV store writes
// and reads.
const kvRecordVersion = 1

// kvRecord is the JSON value of a key in the KV bucket. Operators see it
// with `nats kv get`, so it is plain JSON, and versioned so that a later
// format can be told apart:
//
//	{"v":1,"state":"in_progress","owner":"…","lease_until":"…","fingerprint":"…",
//	 "created_at":"…","updated_at":"…"}
//	{"v":1,"state":"completed","fingerprint":"…","result":{…},"created_at":"…","updated_at":"…"}
//
// Times are RFC 3339 in UTC. Unknown fields are ignored.
type kvRecord struct {
	V           int             `json:"v"`
	State       State           `json:"state"`
	Owner       string          `json:"owner,omitempty"`
	LeaseUntil  time.Time       `json:"lease_until,omitzero"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Failure     string          `json:"failure,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// encode returns the record's JSON. Result must be valid JSON; it is kept
// as is (no HTML escaping).
func (r *kvRecord) encode() ([]byte, error) {
	r.V = kvRecordVersion
	r.LeaseUntil, r.CreatedAt, r.UpdatedAt = r.LeaseUntil.UTC(), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if len(r.Result) > 0 && !json.Valid(r.Result) {
		return nil, errors.New("idempotency: encode record: result is not valid JSON")
	}
	for _, t := range [...]time.Time{r.LeaseUntil, r.CreatedAt, r.UpdatedAt} {
		if y := t.Year(); y < 0 || y > 9999 {
			return nil, fmt.Errorf("idempotency: encode record: year %d out of range", y)
		}
	}
	return appendRecord(make([]byte, 0, 256+len(r.Result)+len(r.Failure)), r), nil
}

// decodeKVRecord decodes the value of key at revision, or returns a
// *CorruptRecordError.
func decodeKVRecord(key string, revision uint64, value []byte) (kvRecord, error) {
	var r kvRecord
	corrupt := func(err error) (kvRecord, error) {
		return kvRecord{}, &CorruptRecordError{Key: key, Revision: revision, Err: err}
	}
	if !json.Valid(value) {
		return corrupt(errors.New("not valid JSON"))
	}
	if !decodeRecordFast(value, &r) {
		r = kvRecord{}
		if err := json.Unmarshal(value, &r); err != nil {
			return corrupt(err)
		}
	}
	if r.V != kvRecordVersion {
		if r.V == 0 {
			return corrupt(errors.New("no record version"))
		}
		return corrupt(fmt.Errorf("unsupported record version %d", r.V))
	}
	switch r.State {
	case StateCompleted, StateFailed:
	case StateInProgress:
		if r.Owner == "" || r.LeaseUntil.IsZero() {
			return corrupt(errors.New("in-progress record without owner or lease"))
		}
	case "":
		return corrupt(errors.New("no state"))
	default:
		return corrupt(fmt.Errorf("unknown state %q", r.State))
	}
	return r, nil
}

// result returns the record's result, nil when it has none.
func (r *kvRecord) result() []byte {
	if len(r.Result) == 0 {
		return nil
	}
	return []byte(r.Result)
}

// record returns r as the Record of key at revision.
func (r *kvRecord) record(key string, revision uint64) Record {
	return Record{
		Key: key, State: r.State, Owner: r.Owner, LeaseUntil: r.LeaseUntil,
		Fingerprint: r.Fingerprint, Result: r.result(), Failure: r.Failure,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Revision: revision,
	}
}
