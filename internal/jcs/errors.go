package jcs

import (
	"errors"
	"strconv"
	"strings"
)

// ErrUnsupported is matched, with errors.Is, by every error Marshal and
// Append return for a value that has no canonical JSON form.
var ErrUnsupported = errors.New("jcs: unsupported value")

// UnsupportedValueError reports a value that cannot be canonicalized: a NaN
// or infinite float, an integer that a double cannot hold exactly, a string
// or object name that is not valid UTF-8, a malformed json.Number, nesting
// deeper than 1000 levels, a duplicate object name produced by a
// json.Marshaler, or a value that encoding/json cannot marshal.
//
// It matches ErrUnsupported with errors.Is and unwraps to Err, if any.
type UnsupportedValueError struct {
	// Path locates the value from the root, as in "$", "$.a[2]" or
	// `$["odd key"]`.
	Path string
	// Reason says why the value was rejected.
	Reason string
	// Err is the underlying cause, such as an encoding/json error. It is
	// nil when there is none.
	Err error
}

// Error returns "jcs: unsupported value at PATH: REASON", followed by
// ": CAUSE" when Err is set.
func (e *UnsupportedValueError) Error() string {
	var b strings.Builder
	b.WriteString("jcs: unsupported value at ")
	if e.Path == "" {
		b.WriteString("$")
	} else {
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is reports whether target is ErrUnsupported.
func (e *UnsupportedValueError) Is(target error) bool { return target == ErrUnsupported }

// Unwrap returns the underlying cause, or nil.
func (e *UnsupportedValueError) Unwrap() error { return e.Err }

// unsupported returns an *UnsupportedValueError for the current value; the
// enclosing containers add their path segments as the error travels up.
func unsupported(reason string, err error) error {
	return &UnsupportedValueError{Reason: reason, Err: err}
}

// prependKey adds an object member segment in front of err's path.
func prependKey(err error, key string) error {
	if e, ok := err.(*UnsupportedValueError); ok {
		if isPlainName(key) {
			e.Path = "." + key + e.Path
		} else {
			e.Path = "[" + strconv.Quote(key) + "]" + e.Path
		}
	}
	return err
}

// prependIndex adds an array element segment in front of err's path.
func prependIndex(err error, i int) error {
	if e, ok := err.(*UnsupportedValueError); ok {
		e.Path = "[" + strconv.Itoa(i) + "]" + e.Path
	}
	return err
}

// rootPath finishes err's path with the "$" root marker.
func rootPath(err error) error {
	if e, ok := err.(*UnsupportedValueError); ok {
		e.Path = "$" + e.Path
	}
	return err
}

// isPlainName reports whether key can be shown as .key in a path.
func isPlainName(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
