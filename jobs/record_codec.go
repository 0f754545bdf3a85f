package jobs

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jetretry/jetretry/internal/jsonx"
)

// The job record is encoded and decoded on every claim, renewal and
// outcome, so it has a reflection-free codec: appendRecord writes what
// encoding/json writes for Record without HTML escaping, and
// decodeRecordFast reads the documents appendRecord writes, checking
// their syntax as strictly as encoding/json. Anything else (escaped
// strings, nulls, non-canonical numbers or times, unknown or repeated
// fields, a policy) is left to encoding/json, so both readers agree on
// every input (record_codec_test.go checks it, also by fuzzing).

// appendRecord appends r's JSON. It reports false, leaving the work to
// encoding/json, for times outside the years 0 to 9999.
func appendRecord(b []byte, r *Record) ([]byte, bool) {
	if !okTime(r.NextRetryAt) || !okTime(r.CreatedAt) || !okTime(r.UpdatedAt) || (r.Run != nil && !okRun(r.Run)) {
		return b, false
	}
	for i := range r.History {
		if !okRun(&r.History[i]) {
			return b, false
		}
	}
	b = append(b, `{"version":`...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	b = appendField(b, "id", r.ID)
	b = appendField(b, "queue", r.Queue)
	b = appendField(b, "key", r.Key)
	if len(r.Payload) > 0 {
		b = append(b, `,"payload":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Payload)
		b = append(b, '"')
	}
	b = appendField(b, "status", string(r.Status))
	b = append(b, `,"attempt_count":`...)
	b = strconv.AppendInt(b, int64(r.AttemptCount), 10)
	b = append(b, `,"budget_used":`...)
	b = strconv.AppendInt(b, int64(r.BudgetUsed), 10)
	b = appendOmit(b, "current_run_id", r.CurrentRunID)
	b = appendOmit(b, "dispatch", r.Dispatch)
	if r.Run != nil {
		b = append(b, `,"run":`...)
		b = appendRun(b, r.Run)
	}
	b = appendOmit(b, "last_error", r.LastError)
	b = appendOmit(b, "error_class", string(r.ErrorClass))
	b = appendTime(b, "next_retry_at", r.NextRetryAt, true)
	b = appendTime(b, "created_at", r.CreatedAt, false)
	b = appendTime(b, "updated_at", r.UpdatedAt, false)
	b = append(b, `,"terminal":`...)
	b = strconv.AppendBool(b, r.Terminal)
	b = appendOmit(b, "terminal_reason", string(r.TerminalReason))
	if r.Reprocess {
		b = append(b, `,"reprocess":true`...)
	}
	if len(r.History) > 0 {
		b = append(b, `,"history":[`...)
		for i := range r.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRun(b, &r.History[i])
		}
		b = append(b, ']')
	}
	if r.HistoryDropped != 0 {
		b = append(b, `,"history_dropped":`...)
		b = strconv.AppendInt(b, int64(r.HistoryDropped), 10)
	}
	if r.Policy != nil {
		p, err := json.Marshal(r.Policy) // rare: a per-job override
		if err != nil {
			return b, false
		}
		b = append(b, `,"policy":`...)
		b = append(b, p...)
	}
	return append(b, '}'), true
}

func appendRun(b []byte, r *Run) []byte {
	b = append(b, `{"run_id":`...)
	b = jsonx.AppendString(b, r.RunID)
	b = appendOmit(b, "owner", r.Owner)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.Reprocess {
		b = append(b, `,"reprocess":true`...)
	}
	b = appendTime(b, "started_at", r.StartedAt, false)
	b = appendTime(b, "lease_until", r.LeaseUntil, true)
	b = appendTime(b, "ended_at", r.EndedAt, true)
	b = appendOmit(b, "outcome", string(r.Outcome))
	b = appendOmit(b, "error", r.Error)
	b = appendOmit(b, "error_type", r.ErrorType)
	b = appendOmit(b, "error_class", string(r.ErrorClass))
	return append(b, '}')
}

func appendField(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return jsonx.AppendString(b, v)
}

func appendOmit(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendField(b, name, v)
}

func appendTime(b []byte, name string, t time.Time, omitZero bool) []byte {
	if omitZero && t.IsZero() {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":"`...)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// okTime reports whether encoding/json writes t as AppendFormat does:
// years 0 to 9999 and a zone offset in whole minutes under 24 hours.
func okTime(t time.Time) bool {
	if y := t.Year(); y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	return off%60 == 0 && off > -24*3600 && off < 24*3600
}

func okRun(r *Run) bool {
	return okTime(r.StartedAt) && okTime(r.LeaseUntil) && okTime(r.EndedAt)
}

// recordFields and runFields are the JSON names of Record's and Run's
// fields, indexed to notice repeats.
var (
	recordFields = []string{"version", "id", "queue", "key", "payload", "status", "attempt_count", "budget_used",
		"current_run_id", "dispatch", "run", "last_error", "error_class", "next_retry_at", "created_at", "updated_at",
		"terminal", "terminal_reason", "reprocess", "history", "history_dropped", "policy"}
	runFields = []string{"run_id", "owner", "attempt", "reprocess", "started_at", "lease_until", "ended_at",
		"outcome", "error", "error_type", "error_class"}
	recordIndex = indexOf(recordFields)
	runIndex    = indexOf(runFields)
)

func indexOf(names []string) map[string]int {
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}

// decodeRecordFast decodes value into r (which must be zero). It reports false for anything outside what appendRecord
// writes; the caller then uses encoding/json.
func decodeRecordFast(value []byte, r *Record) bool {
	var seen uint32 // a repeated field is left to encoding/json
	return jsonx.Fields(value, func(name, raw []byte) bool {
		if k, ok := recordIndex[string(name)]; ok {
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
		}
		switch string(name) {
		case "version":
			return fastInt(raw, &r.Version)
		case "id":
			return fastString(raw, &r.ID)
		case "queue":
			return fastString(raw, &r.Queue)
		case "key":
			return fastString(raw, &r.Key)
		case "payload":
			var s string
			if !fastString(raw, &s) {
				return false
			}
			p, err := base64.StdEncoding.DecodeString(s)
			if err != nil || base64.StdEncoding.EncodeToString(p) != s {
				return false
			}
			r.Payload = p
			return true
		case "status":
			return fastString(raw, (*string)(&r.Status))
		case "attempt_count":
			return fastInt(raw, &r.AttemptCount)
		case "budget_used":
			return fastInt(raw, &r.BudgetUsed)
		case "current_run_id":
			return fastString(raw, &r.CurrentRunID)
		case "dispatch":
			return fastString(raw, &r.Dispatch)
		case "run":
			var run Run
			if !decodeRunFast(raw, &run) {
				return false
			}
			r.Run = &run
			return true
		case "last_error":
			return fastString(raw, &r.LastError)
		case "error_class":
			return fastString(raw, (*string)(&r.ErrorClass))
		case "next_retry_at":
			return fastTime(raw, &r.NextRetryAt)
		case "created_at":
			return fastTime(raw, &r.CreatedAt)
		case "updated_at":
			return fastTime(raw, &r.UpdatedAt)
		case "terminal":
			return fastBool(raw, &r.Terminal)
		case "terminal_reason":
			return fastString(raw, (*string)(&r.TerminalReason))
		case "reprocess":
			return fastBool(raw, &r.Reprocess)
		case "history":
			return decodeHistoryFast(raw, r)
		case "history_dropped":
			return fastInt(raw, &r.HistoryDropped)
		case "policy":
			return false // rare; encoding/json reads it
		}
		return false // unknown, or another spelling: encoding/json decides
	})
}

func decodeHistoryFast(raw []byte, r *Record) bool {
	if len(raw) < 2 || raw[0] != '[' {
		return false
	}
	h := make([]Run, 0, 4)
	i := jsonx.SkipSpace(raw, 1)
	if raw[i] == ']' {
		return false // encoding/json keeps an empty, non-nil slice
	}
	for i < len(raw) {
		end := jsonx.SkipValue(raw, i)
		if end < 0 {
			return false
		}
		var run Run
		if !decodeRunFast(raw[i:end], &run) {
			return false
		}
		h = append(h, run)
		i = jsonx.SkipSpace(raw, end)
		if i >= len(raw) {
			return false
		}
		switch raw[i] {
		case ',':
			i = jsonx.SkipSpace(raw, i+1)
		case ']':
			r.History = h
			return i+1 == len(raw)
		default:
			return false
		}
	}
	return false
}

func decodeRunFast(raw []byte, r *Run) bool {
	var seen uint32
	return jsonx.Fields(raw, func(name, v []byte) bool {
		if k, ok := runIndex[string(name)]; ok {
			if seen&(1<<k) != 0 {
				return false
			}
			seen |= 1 << k
		}
		switch string(name) {
		case "run_id":
			return fastString(v, &r.RunID)
		case "owner":
			return fastString(v, &r.Owner)
		case "attempt":
			return fastInt(v, &r.Attempt)
		case "reprocess":
			return fastBool(v, &r.Reprocess)
		case "started_at":
			return fastTime(v, &r.StartedAt)
		case "lease_until":
			return fastTime(v, &r.LeaseUntil)
		case "ended_at":
			return fastTime(v, &r.EndedAt)
		case "outcome":
			return fastString(v, (*string)(&r.Outcome))
		case "error":
			return fastString(v, &r.Error)
		case "error_type":
			return fastString(v, &r.ErrorType)
		case "error_class":
			return fastString(v, (*string)(&r.ErrorClass))
		}
		return false
	})
}

func fastString(raw []byte, dst *string) bool {
	s, end, ok := jsonx.PlainString(raw, 0)
	if !ok || end != len(raw) {
		return false
	}
	*dst = s
	return true
}

// fastInt reads a canonical decimal int: no sign but '-', no leading
// zeros, no "-0", no overflow.
func fastInt(raw []byte, dst *int) bool {
	d := raw
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return false
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		n = -n
	}
	*dst = n
	return true
}

func fastBool(raw []byte, dst *bool) bool {
	switch string(raw) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}

// fastTime reads a time written by appendTime: in UTC,
// YYYY-MM-DDTHH:MM:SS[.fraction]Z with the fraction's trailing zeros
// trimmed, as RFC3339Nano formats it; other offsets through time.Parse,
// when they format back to the same text.
func fastTime(raw []byte, dst *time.Time) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	s := raw[1 : len(raw)-1]
	if t, ok := parseUTC(s); ok {
		*dst = t
		return true
	}
	var str string
	if !fastString(raw, &str) {
		return false
	}
	t, err := time.Parse(time.RFC3339Nano, str)
	if err != nil || !okTime(t) {
		return false
	}
	var buf [64]byte
	if string(t.AppendFormat(buf[:0], time.RFC3339Nano)) != str {
		return false
	}
	*dst = t
	return true
}

// parseUTC parses the UTC form of RFC3339Nano.
func parseUTC(s []byte) (time.Time, bool) {
	if len(s) < 20 || s[len(s)-1] != 'Z' || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(b []byte) int {
		n := 0
		for _, c := range b {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	y, mo, d, h, mi, sec := num(s[0:4]), num(s[5:7]), num(s[8:10]), num(s[11:13]), num(s[14:16]), num(s[17:19])
	ns := 0
	if frac := s[19 : len(s)-1]; len(frac) > 0 {
		digits := frac[1:]
		if frac[0] != '.' || len(digits) == 0 || len(digits) > 9 || digits[len(digits)-1] == '0' {
			return time.Time{}, false
		}
		ns = num(digits)
		if ns < 0 {
			return time.Time{}, false
		}
		for range 9 - len(digits) {
			ns *= 10
		}
	}
	if y < 0 || mo < 1 || d < 1 || h < 0 || mi < 0 || sec < 0 {
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC)
	if t.Year() != y || int(t.Month()) != mo || t.Day() != d || t.Hour() != h || t.Minute() != mi || t.Second() != sec {
		return time.Time{}, false // out of range: time.Date normalized it
	}
	return t.Add(time.Duration(ns)), true
}
