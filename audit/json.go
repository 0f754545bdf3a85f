package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the JSON object for e to dst and returns the extended
// buffer. It never fails and, for an event without AdditionalContext, does
// not allocate beyond growing dst. The output is compact (no spaces) and
// always valid JSON.
//
// Field order and presence depend on e.Type:
//
//   - retry_attempt: event_type, retry_category, operation, attempt_number,
//     max_attempts, delay_seconds, exception_type, exception_message,
//     tenant_id, correlation_id, trace_id, timestamp, span_id, event_id,
//     schema_version.
//   - retry_exhausted: event_type, retry_category, operation,
//     total_attempts, final_exception_type, final_exception_message,
//     tenant_id, correlation_id, trace_id, timestamp, stop_reason (only when
//     non-empty), span_id, event_id, schema_version.
//   - idempotency: event_type, retry_category, operation, idempotency_key,
//     action, tenant_id, correlation_id, trace_id, timestamp, span_id,
//     event_id, schema_version.
//   - any other type: event_type, retry_category, operation, then each
//     non-zero field among attempt_number, max_attempts, delay_seconds,
//     exception_type, exception_message, total_attempts,
//     final_exception_type, final_exception_message, stop_reason,
//     idempotency_key and action, then tenant_id, correlation_id, trace_id,
//     timestamp, span_id, event_id, schema_version.
//
// Every listed field is written even when zero ("tenant_id":"",
// "delay_seconds":0), so consumers see a stable shape; fields that do not
// belong to the type are not written. additional_context comes last, only
// when it has entries, with its keys sorted.
//
// Values: delay_seconds is the shortest decimal that round-trips, and a
// NaN or infinite delay is written as 0. timestamp is RFC 3339 in UTC with
// fractional seconds only when non-zero (the zero time gives
// "0001-01-01T00:00:00Z"). schema_version is e.SchemaVersion, or the
// package's SchemaVersion when e.SchemaVersion is 0. Strings are escaped as
// encoding/json does, except that <, > and & are kept as they are; invalid
// UTF-8 becomes U+FFFD. An additional_context value that encoding/json
// cannot encode (a channel, a NaN) is replaced by a string that starts with
// "audit: unencodable value: ", so the event is never lost.
//
// AppendJSON does not truncate messages; producers call TruncateMessage.
func (e Event) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"event_type":`...)
	dst = appendString(dst, string(e.Type))
	dst = append(dst, `,"retry_category":`...)
	dst = appendString(dst, e.Category)
	dst = append(dst, `,"operation":`...)
	dst = appendString(dst, e.Operation)

	switch e.Type {
	case TypeRetryAttempt:
		dst = appendIntField(dst, `,"attempt_number":`, e.AttemptNumber)
		dst = appendIntField(dst, `,"max_attempts":`, e.MaxAttempts)
		dst = appendFloatField(dst, `,"delay_seconds":`, e.DelaySeconds)
		dst = appendStringField(dst, `,"exception_type":`, e.ExceptionType)
		dst = appendStringField(dst, `,"exception_message":`, e.ExceptionMessage)
		dst = appendCommon(dst, &e)
	case TypeRetryExhausted:
		dst = appendIntField(dst, `,"total_attempts":`, e.TotalAttempts)
		dst = appendStringField(dst, `,"final_exception_type":`, e.FinalExceptionType)
		dst = appendStringField(dst, `,"final_exception_message":`, e.FinalExceptionMessage)
		dst = appendCommon(dst, &e)
		if e.StopReason != "" {
			dst = appendStringField(dst, `,"stop_reason":`, e.StopReason)
		}
	case TypeIdempotency:
		dst = appendStringField(dst, `,"idempotency_key":`, e.IdempotencyKey)
		dst = appendStringField(dst, `,"action":`, string(e.Action))
		dst = appendCommon(dst, &e)
	default:
		if e.AttemptNumber != 0 {
			dst = appendIntField(dst, `,"attempt_number":`, e.AttemptNumber)
		}
		if e.MaxAttempts != 0 {
			dst = appendIntField(dst, `,"max_attempts":`, e.MaxAttempts)
		}
		if finite(e.DelaySeconds) != 0 {
			dst = appendFloatField(dst, `,"delay_seconds":`, e.DelaySeconds)
		}
		if e.ExceptionType != "" {
			dst = appendStringField(dst, `,"exception_type":`, e.ExceptionType)
		}
		if e.ExceptionMessage != "" {
			dst = appendStringField(dst, `,"exception_message":`, e.ExceptionMessage)
		}
		if e.TotalAttempts != 0 {
			dst = appendIntField(dst, `,"total_attempts":`, e.TotalAttempts)
		}
		if e.FinalExceptionType != "" {
			dst = appendStringField(dst, `,"final_exception_type":`, e.FinalExceptionType)
		}
		if e.FinalExceptionMessage != "" {
			dst = appendStringField(dst, `,"final_exception_message":`, e.FinalExceptionMessage)
		}
		if e.StopReason != "" {
			dst = appendStringField(dst, `,"stop_reason":`, e.StopReason)
		}
		if e.IdempotencyKey != "" {
			dst = appendStringField(dst, `,"idempotency_key":`, e.IdempotencyKey)
		}
		if e.Action != "" {
			dst = appendStringField(dst, `,"action":`, string(e.Action))
		}
		dst = appendCommon(dst, &e)
	}

	dst = appendStringField(dst, `,"span_id":`, e.SpanID)
	dst = appendStringField(dst, `,"event_id":`, e.EventID)
	v := e.SchemaVersion
	if v == 0 {
		v = SchemaVersion
	}
	dst = appendIntField(dst, `,"schema_version":`, v)
	if len(e.AdditionalContext) > 0 {
		dst = append(dst, `,"additional_context":`...)
		dst = appendContext(dst, e.AdditionalContext)
	}
	return append(dst, '}')
}

// MarshalJSON implements json.Marshaler with AppendJSON. It never returns an
// error. Note that json.Marshal and json.Encoder re-validate what it returns
// and, by default, escape <, > and & in it; AppendJSON avoids that cost.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(make([]byte, 0, 512)), nil
}

// eventJSON is the decoding form of Event. Missing fields decode to zero.
type eventJSON struct {
	Type                  Type           `json:"event_type"`
	Category              string         `json:"retry_category"`
	Operation             string         `json:"operation"`
	AttemptNumber         int            `json:"attempt_number"`
	MaxAttempts           int            `json:"max_attempts"`
	DelaySeconds          float64        `json:"delay_seconds"`
	ExceptionType         string         `json:"exception_type"`
	ExceptionMessage      string         `json:"exception_message"`
	TotalAttempts         int            `json:"total_attempts"`
	FinalExceptionType    string         `json:"final_exception_type"`
	FinalExceptionMessage string         `json:"final_exception_message"`
	StopReason            string         `json:"stop_reason"`
	IdempotencyKey        string         `json:"idempotency_key"`
	Action                Action         `json:"action"`
	TenantID              string         `json:"tenant_id"`
	CorrelationID         string         `json:"correlation_id"`
	TraceID               string         `json:"trace_id"`
	SpanID                string         `json:"span_id"`
	Timestamp             time.Time      `json:"timestamp"`
	EventID               string         `json:"event_id"`
	SchemaVersion         int            `json:"schema_version"`
	AdditionalContext     map[string]any `json:"additional_context"`
}

// UnmarshalJSON implements json.Unmarshaler. It accepts the output of
// AppendJSON and any object with the same field names: missing fields
// become zero values and unknown fields are ignored, so events written by a
// newer schema still decode. The JSON null leaves e unchanged. Numbers in
// AdditionalContext decode as float64, as with encoding/json. The timestamp
// must be RFC 3339. Errors wrap the encoding/json or time parse error and
// start with "audit: decode event: ".
func (e *Event) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var a eventJSON
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("audit: decode event: %w", err)
	}
	*e = Event{
		Type:                  a.Type,
		Category:              a.Category,
		Operation:             a.Operation,
		AttemptNumber:         a.AttemptNumber,
		MaxAttempts:           a.MaxAttempts,
		DelaySeconds:          a.DelaySeconds,
		ExceptionType:         a.ExceptionType,
		ExceptionMessage:      a.ExceptionMessage,
		TotalAttempts:         a.TotalAttempts,
		FinalExceptionType:    a.FinalExceptionType,
		FinalExceptionMessage: a.FinalExceptionMessage,
		StopReason:            a.StopReason,
		IdempotencyKey:        a.IdempotencyKey,
		Action:                a.Action,
		TenantID:              a.TenantID,
		CorrelationID:         a.CorrelationID,
		TraceID:               a.TraceID,
		SpanID:                a.SpanID,
		Timestamp:             a.Timestamp,
		EventID:               a.EventID,
		SchemaVersion:         a.SchemaVersion,
		AdditionalContext:     a.AdditionalContext,
	}
	return nil
}

// appendCommon appends the fields that close every seed 002 sample.
func appendCommon(dst []byte, e *Event) []byte {
	dst = appendStringField(dst, `,"tenant_id":`, e.TenantID)
	dst = appendStringField(dst, `,"correlation_id":`, e.CorrelationID)
	dst = appendStringField(dst, `,"trace_id":`, e.TraceID)
	dst = append(dst, `,"timestamp":"`...)
	dst = e.Timestamp.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

func appendStringField(dst []byte, key, s string) []byte {
	return appendString(append(dst, key...), s)
}

func appendIntField(dst []byte, key string, n int) []byte {
	return strconv.AppendInt(append(dst, key...), int64(n), 10)
}

func appendFloatField(dst []byte, key string, f float64) []byte {
	return strconv.AppendFloat(append(dst, key...), finite(f), 'f', -1, 64)
}

// finite returns f, or 0 when f is NaN or infinite (JSON has no such
// numbers).
func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// appendContext appends m as a JSON object with sorted keys. Values are
// encoded by encoding/json without HTML escaping; a value it rejects is
// replaced by a string naming the error.
func appendContext(dst []byte, m map[string]any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	dst = append(dst, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		buf.Reset()
		if err := enc.Encode(m[k]); err != nil {
			dst = appendString(dst, "audit: unencodable value: "+err.Error())
			continue
		}
		dst = append(dst, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. It escapes like encoding/json
// with HTML escaping off: ", \ and control characters are escaped (\n, \r,
// \t, \b, \f by name, others as \u00XX), U+2028 and U+2029 as \u2028 and
// \u2029, and each invalid UTF-8 byte becomes \ufffd.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
