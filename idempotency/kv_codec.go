package idempotency

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// appendRecord appends r's JSON, the same document encoding/json would
// write for kvRecord (field order, omitted empty fields, RFC 3339 times,
// no HTML escaping), without reflection. r.Result must be valid JSON.
func appendRecord(b []byte, r *kvRecord) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = append(b, `,"state":`...)
	b = appendString(b, string(r.State))
	if r.Owner != "" {
		b = append(b, `,"owner":`...)
		b = appendString(b, r.Owner)
	}
	if !r.LeaseUntil.IsZero() {
		b = append(b, `,"lease_until":"`...)
		b = r.LeaseUntil.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	if r.Fingerprint != "" {
		b = append(b, `,"fingerprint":`...)
		b = appendString(b, r.Fingerprint)
	}
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b = append(b, r.Result...)
	}
	if r.Failure != "" {
		b = append(b, `,"failure":`...)
		b = appendString(b, r.Failure)
	}
	b = append(b, `,"created_at":"`...)
	b = r.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","updated_at":"`...)
	b = r.UpdatedAt.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, U+2028 and U+2029 escaped, invalid UTF-8 replaced by
// U+FFFD, nothing else escaped: the output of encoding/json without HTML
// escaping.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' { // as encoding/json does
				b = append(b, s[start:i]...)
				b = append(b, `\u202`...)
				b = append(b, hex[r&0xf])
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		case '\t':
			b = append(b, `\t`...)
		default:
			b = append(b, `\u00`...)
			b = append(b, hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// recordKeys are kvRecord's JSON field names.
var recordKeys = [...]string{"v", "state", "owner", "lease_until", "fingerprint", "result", "failure", "created_at", "updated_at"}

// decodeRecordFast decodes value into r without reflection. value must be
// valid JSON (the caller checks). It returns false, leaving the work to
// encoding/json, for anything it does not handle: escaped strings, a
// non-object, a known field of an unexpected type.
func decodeRecordFast(value []byte, r *kvRecord) bool {
	i := skipSpace(value, 0)
	if i >= len(value) || value[i] != '{' {
		return false
	}
	i = skipSpace(value, i+1)
	if i < len(value) && value[i] == '}' {
		return true
	}
	for i < len(value) {
		key, j, ok := plainString(value, i)
		if !ok {
			return false
		}
		i = skipSpace(value, j)
		if i >= len(value) || value[i] != ':' {
			return false
		}
		i = skipSpace(value, i+1)
		end := skipValue(value, i)
		if end < 0 {
			return false
		}
		raw := value[i:end]
		switch key {
		case "v":
			n, err := strconv.Atoi(string(raw))
			if err != nil {
				return false
			}
			r.V = n
		case "state", "owner", "fingerprint", "failure":
			s, _, ok := plainString(raw, 0)
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
			s, _, ok := plainString(raw, 0)
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
		i = skipSpace(value, end)
		if i >= len(value) {
			return false
		}
		switch value[i] {
		case ',':
			i = skipSpace(value, i+1)
		case '}':
			return skipSpace(value, i+1) == len(value)
		default:
			return false
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string without escapes, of valid UTF-8, at b[i]. It returns the
// string and the index after its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			if !utf8.Valid(b[i+1 : j]) {
				return "", i, false // encoding/json substitutes U+FFFD
			}
			return string(b[i+1 : j]), j + 1, true
		case '\\':
			return "", i, false
		}
	}
	return "", i, false
}

// skipValue returns the index after the JSON value at b[i] of a document
// known to be valid, or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		for j := i + 1; j < len(b); j++ {
			switch b[j] {
			case '\\':
				j++
			case '"':
				return j + 1
			}
		}
		return -1
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				k := skipValue(b, j)
				if k < 0 {
					return -1
				}
				j = k - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}
