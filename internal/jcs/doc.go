// Package jcs encodes Go values as RFC 8785 JSON Canonicalization Scheme
// (JCS) text: the one byte sequence that every conforming implementation,
// in any language, produces for the same JSON data. Hashes and signatures
// computed over that text are therefore reproducible across processes and
// languages.
//
// The output is UTF-8 JSON with no insignificant whitespace, object members
// sorted by the UTF-16 code units of their names, strings escaped only where
// JSON requires it, and numbers written the way ECMAScript's
// Number.prototype.toString writes IEEE 754 doubles.
//
// # Accepted values
//
// Marshal and Append handle these types directly: nil, bool, string, every
// Go integer kind, float32, float64, [json.Number], []any, []string,
// map[string]any and map[string]string. Any other value is first marshalled
// with [encoding/json] and the result decoded (numbers as [json.Number])
// before it is canonicalized, so struct tags, [json.Marshaler] and
// [encoding.TextMarshaler] are honoured. As with encoding/json, a nil slice or
// nil map is written as null.
//
// # Numbers
//
// JCS numbers are IEEE 754 doubles. Floats are written with the shortest
// decimal digits that round-trip, in plain notation when the decimal
// exponent allows it (1e-6 <= |v| < 1e21) and in exponent notation otherwise
// (1e+21, 1.5e-7). Negative zero is written as 0. NaN and infinities have
// no JSON form and are rejected.
//
// A float32 is first rounded to its own shortest decimal form (as
// encoding/json writes it), so float32(0.1) becomes 0.1, not
// 0.10000000149011612.
//
// Integers, whether Go integer kinds or json.Number literals without a
// fraction or exponent, must survive the conversion to a double without
// changing value: 9007199254740993 (2^53+1) is rejected rather than silently
// written as 9007199254740992, while 1000000000000000000 is accepted. Any
// other json.Number (one with a fraction or exponent) is parsed as the
// nearest double, exactly as JSON.parse would, so 0.30000000000000000001
// becomes 0.3.
//
// # Strings
//
// Strings and object names must be valid UTF-8. Only '"', '\\' and control
// characters below U+0020 are escaped (\b, \t, \n, \f and \r in their short
// forms, others as \u00xx with lowercase hex). HTML characters, U+2028,
// U+2029 and all other non-ASCII characters are written as raw UTF-8. Values
// that go through encoding/json first have invalid UTF-8 replaced by U+FFFD
// by encoding/json itself.
//
// # Errors
//
// Every value that has no canonical form yields an *[UnsupportedValueError]
// whose Path locates the value; all such errors match [ErrUnsupported] with
// errors.Is.
package jcs
