package idempotency

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jetretry/jetretry/internal/jsonx"
)

// appendRecord appends r's JSON, the same document encoding/json would
// write for kvRecord (field order, omitted empty fields, RFC 3339 times,
// no HTML escaping), without reflection. r.Result must be valid JSON.
func appendRecord(b []byte, r *kvRecord) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"state":`...)
	b = jsonx.AppendString(b, string(r.State))
	if r.Owner != "" {
		b = append(b, `,"owner":`...)
		b = jsonx.AppendString(b, r.Owner)
	}
	if !r.LeaseUntil.IsZero() {
		b = append(b, `,"lease_until":"`...)
		b = r.LeaseUntil.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if r.Fingerprint != "" {
		b = append(b, `,"fingerprint":`...)
		b = jsonx.AppendString(b, r.Fingerprint)
	}
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, r.Result...)
	}
	if r.Failure != "" {
		b = append(b, `,"failure":`...)
		b = jsonx.AppendString(b, r.Failure)
	}
	b = append(b, `,"created_at":"`...)
	b = r.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","updated_at":"`...)
	b = r.UpdatedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// recordKeys are kvRecord's JSON field names.
var recordKeys = [...]string{"v", "state", "owner", "lease_until", "fingerprint", "result", "failure", "created_at", "updated_at"}

// decodeRecordFast decodes value into r without reflection, reading the
// object with jsonx.Fields. value must be valid JSON (the caller checks). It returns false, leaving the work to
// encoding/json, for anything it does not handle: escaped strings, a
// non-object, a known field of an unexpected type.
func decodeRecordFast(value []byte, r *kvRecord) bool {
	return jsonx.Fields(value, func(name, raw []byte) bool {
		key := string(name)
		switch key {
		case "v":
			n, err := strconv.Atoi(string(raw))
			if err != nil {
				return false
			}
			r.V = n
		case "state", "owner", "fingerprint", "failure":
			s, _, ok := jsonx.PlainString(raw, 0)
			if !ok {
				return false
			}
			switch key {
			case "state":
				r.State = State(s)
			case "owner":
				r.Owner = s
			case "fingerprint":
				r.Fingerprint = s
			default:
				r.Failure = s
			}
		case "lease_until", "created_at", "updated_at":
			s, _, ok := jsonx.PlainString(raw, 0)
			if !ok {
				return false
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return false
			}
			switch key {
			case "lease_until":
				r.LeaseUntil = t
			case "created_at":
				r.CreatedAt = t
			default:
				r.UpdatedAt = t
			}
		case "result":
			r.Result = json.RawMessage(raw) // as encoding/json: null stays "null"
		default:
			// encoding/json matches field names case-insensitively.
			for _, k := range recordKeys {
				if strings.EqualFold(key, k) {
					return false
				}
			}
		}
		return true
	})
}
