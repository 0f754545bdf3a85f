// Package jsonx holds the pieces of the reflection-free JSON codecs of the
// idempotency and jobs records: a string encoder that writes what
// encoding/json writes without HTML escaping, and a scanner for documents
// already known to be valid JSON.
package jsonx

import "unicode/utf8"

// AppendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, U+2028 and U+2029 escaped, invalid UTF-8 replaced by
// U+FFFD, nothing else escaped: the output of encoding/json without HTML
// escaping.
func AppendString(b []byte, s string) []byte {
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
		case '\b':
			b = append(b, `\b`...)
		case '\f':
			b = append(b, `\f`...)
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

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// PlainString reads a JSON string at b[i] that has no escapes, no control
// characters and is valid UTF-8. It returns the string and the index after
// its closing quote.
func PlainString(b []byte, i int) (string, int, bool) {
	s, j, ok := plainBytes(b, i)
	if !ok {
		return "", i, false
	}
	return string(s), j, true
}

// plainBytes is PlainString without the copy.
func plainBytes(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			if !utf8.Valid(b[i+1 : j]) {
				return nil, i, false // encoding/json substitutes U+FFFD
			}
			return b[i+1 : j], j + 1, true
		case '\\':
			return nil, i, false
		}
		if b[j] < 0x20 {
			return nil, i, false // not JSON
		}
	}
	return nil, i, false
}

// SkipValue returns the index after the JSON value at b[i] of a document
// known to be valid, or -1.
func SkipValue(b []byte, i int) int {
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
				k := SkipValue(b, j)
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

// Fields calls fn with each member of the JSON object b in order: its name (the bytes between the quotes, which
// have no escapes and are valid UTF-8; fn must not keep them) and its raw
// value, found by SkipValue. It checks the object's own syntax strictly;
// fn must check each value. It returns false when b is not such an
// object, a name has escapes, or fn returns false.
func Fields(b []byte, fn func(name, raw []byte) bool) bool {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return SkipSpace(b, i+1) == len(b)
	}
	for i < len(b) {
		name, j, ok := plainBytes(b, i)
		if !ok {
			return false
		}
		i = SkipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = SkipSpace(b, i+1)
		end := SkipValue(b, i)
		if end < 0 || !fn(name, b[i:end]) {
			return false
		}
		i = SkipSpace(b, end)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case '}':
			return SkipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
	return false
}
