package jcs

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects. It turns a cyclic
// []any or map[string]any into an error instead of a stack overflow.
const maxDepth = 1000

// Marshal returns the RFC 8785 canonical JSON encoding of v. See the package
// documentation for the accepted values.
//
// It returns an error matching ErrUnsupported (an *UnsupportedValueError)
// when v, or a value nested in it, has no canonical form.
func Marshal(v any) ([]byte, error) {
	return Append(nil, v)
}

// Append appends the RFC 8785 canonical JSON encoding of v to dst and
// returns the extended slice. See the package documentation for the
// accepted values.
//
// It returns an error matching ErrUnsupported (an *UnsupportedValueError)
// when v, or a value nested in it, has no canonical form; the returned
// slice is then dst, whose first len(dst) bytes are unchanged.
func Append(dst []byte, v any) ([]byte, error) {
	e := encoder{buf: dst}
	if err := e.value(v); err != nil {
		return dst, rootPath(err)
	}
	return e.buf, nil
}

// encoder accumulates canonical output. It is used by one call only.
type encoder struct {
	buf   []byte
	depth int
}

// value appends the canonical form of v.
func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, "null"...)
	case bool:
		e.buf = strconv.AppendBool(e.buf, x)
	case string:
		return e.string(x)
	case int:
		return e.int(int64(x))
	case int8:
		return e.int(int64(x))
	case int16:
		return e.int(int64(x))
	case int32:
		return e.int(int64(x))
	case int64:
		return e.int(x)
	case uint:
		return e.uint(uint64(x))
	case uint8:
		return e.uint(uint64(x))
	case uint16:
		return e.uint(uint64(x))
	case uint32:
		return e.uint(uint64(x))
	case uint64:
		return e.uint(x)
	case uintptr:
		return e.uint(uint64(x))
	case float32:
		return e.float32(x)
	case float64:
		return e.float64(x)
	case json.Number:
		return e.number(x)
	case []any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.array(len(x), func(i int) error { return e.value(x[i]) })
	case []string:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.array(len(x), func(i int) error { return e.string(x[i]) })
	case map[string]any:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.object(mapKeys(x), func(k string) error { return e.value(x[k]) })
	case map[string]string:
		if x == nil {
			e.buf = append(e.buf, "null"...)
			return nil
		}
		return e.object(mapKeys(x), func(k string) error { return e.string(x[k]) })
	default:
		return e.viaJSON(v)
	}
	return nil
}

// mapKeys returns the keys of m in unspecified order.
func mapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// enter records one more level of nesting and fails past maxDepth.
func (e *encoder) enter() error {
	e.depth++
	if e.depth > maxDepth {
		return unsupported(fmt.Sprintf("nesting deeper than %d levels (cyclic value?)", maxDepth), nil)
	}
	return nil
}

// array appends n elements, each written by elem, as a JSON array.
func (e *encoder) array(n int, elem func(i int) error) error {
	if err := e.enter(); err != nil {
		return err
	}
	e.buf = append(e.buf, '[')
	for i := range n {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		if err := elem(i); err != nil {
			return prependIndex(err, i)
		}
	}
	e.buf = append(e.buf, ']')
	e.depth--
	return nil
}

// object appends the members named by keys, each value written by member,
// as a JSON object with the names in UTF-16 code unit order. It reorders
// keys in place.
func (e *encoder) object(keys []string, member func(key string) error) error {
	if err := e.enter(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := checkUTF8(k); err != nil {
			return prependKey(err, k)
		}
	}
	slices.SortFunc(keys, compareUTF16)
	e.buf = append(e.buf, '{')
	for i, k := range keys {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		e.appendString(k)
		e.buf = append(e.buf, ':')
		if err := member(k); err != nil {
			return prependKey(err, k)
		}
	}
	e.buf = append(e.buf, '}')
	e.depth--
	return nil
}

// compareUTF16 orders valid UTF-8 strings by their UTF-16 code units, as
// RFC 8785 section 3.2.3 requires. This differs from byte (and code point)
// order only between supplementary characters (U+10000 and up, encoded as
// surrogates D800-DFFF) and BMP characters U+E000-U+FFFF: the former sort
// first in UTF-16.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Order(ra), utf16Order(rb))
		}
		a, b = a[na:], b[nb:]
	}
	// One is a prefix of the other; the shorter sorts first.
	return cmp.Compare(len(a), len(b))
}

// utf16Order maps r to a number whose order matches the order of r's UTF-16
// encoding: a BMP character becomes its code unit shifted left by 10, and a
// supplementary character its high surrogate shifted left by 10 plus the 10
// bits its low surrogate carries. Valid UTF-8 never holds a lone surrogate,
// so a BMP character never ties with a high surrogate.
func utf16Order(r rune) int32 {
	if r < 0x10000 {
		return r << 10
	}
	r -= 0x10000
	high := 0xD800 + r>>10
	return high<<10 | r&0x3FF
}

// checkUTF8 fails when s is not valid UTF-8.
func checkUTF8(s string) error {
	if utf8.ValidString(s) {
		return nil
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return unsupported(fmt.Sprintf("string is not valid UTF-8 (bad byte 0x%02x at offset %d)", s[i], i), nil)
		}
		i += n
	}
	return unsupported("string is not valid UTF-8", nil) // unreachable
}

// string appends s as a JSON string after checking it is valid UTF-8.
func (e *encoder) string(s string) error {
	if err := checkUTF8(s); err != nil {
		return err
	}
	e.appendString(s)
	return nil
}

// hexDigits are the lowercase hex digits of \u00xx escapes.
const hexDigits = "0123456789abcdef"

// appendString appends valid UTF-8 s as a JSON string, escaping only '"',
// '\\' and control characters, as ECMAScript's JSON.stringify does.
func (e *encoder) appendString(s string) {
	e.buf = append(e.buf, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue // bytes of multi-byte characters are all >= 0x80
		}
		e.buf = append(e.buf, s[start:i]...)
		switch c {
		case '"', '\\':
			e.buf = append(e.buf, '\\', c)
		case '\b':
			e.buf = append(e.buf, '\\', 'b')
		case '\t':
			e.buf = append(e.buf, '\\', 't')
		case '\n':
			e.buf = append(e.buf, '\\', 'n')
		case '\f':
			e.buf = append(e.buf, '\\', 'f')
		case '\r':
			e.buf = append(e.buf, '\\', 'r')
		default:
			e.buf = append(e.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		start = i + 1
	}
	e.buf = append(e.buf, s[start:]...)
	e.buf = append(e.buf, '"')
}

// maxExact is 2^53: every integer of at most this magnitude is a double.
const maxExact = 1 << 53

// int appends an integer, failing if a double cannot hold it exactly.
func (e *encoder) int(v int64) error {
	if v >= -maxExact && v <= maxExact {
		e.buf = strconv.AppendInt(e.buf, v, 10)
		return nil
	}
	return e.bigInteger(strconv.FormatInt(v, 10), float64(v))
}

// uint appends an unsigned integer, failing if a double cannot hold it
// exactly.
func (e *encoder) uint(v uint64) error {
	if v <= maxExact {
		e.buf = strconv.AppendUint(e.buf, v, 10)
		return nil
	}
	return e.bigInteger(strconv.FormatUint(v, 10), float64(v))
}

// bigInteger appends f, the double nearest to the integer whose decimal
// digits are lit, if its canonical form denotes exactly that integer.
func (e *encoder) bigInteger(lit string, f float64) error {
	if math.IsInf(f, 0) {
		return unsupported(fmt.Sprintf("integer %s is beyond the range of a double", lit), nil)
	}
	canon := appendNumber(nil, f)
	if !sameValue(lit, canon) {
		return unsupported(fmt.Sprintf("integer %s is not exactly representable as a double (it would become %s)", lit, canon), nil)
	}
	e.buf = append(e.buf, canon...)
	return nil
}

// float64 appends f, failing on NaN and infinities.
func (e *encoder) float64(f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return unsupported(fmt.Sprintf("%v is not a JSON number", f), nil)
	}
	e.buf = appendNumber(e.buf, f)
	return nil
}

// float32 appends f as the double nearest to f's shortest float32 decimal
// form, so that float32(0.1) is written 0.1 as encoding/json writes it.
func (e *encoder) float32(f float32) error {
	g := float64(f)
	if math.IsNaN(g) || math.IsInf(g, 0) {
		return unsupported(fmt.Sprintf("%v is not a JSON number", f), nil)
	}
	var scratch [32]byte
	g, err := strconv.ParseFloat(string(strconv.AppendFloat(scratch[:0], g, 'g', -1, 32)), 64)
	if err != nil {
		return unsupported(fmt.Sprintf("float32 %v", f), err) // unreachable: finite float32 text always parses
	}
	e.buf = appendNumber(e.buf, g)
	return nil
}

// number appends a json.Number. Integer literals must be exact (see
// bigInteger); other literals are rounded to the nearest double.
func (e *encoder) number(n json.Number) error {
	s := string(n)
	if !validNumber(s) {
		return unsupported(fmt.Sprintf("json.Number %q is not a valid JSON number", s), nil)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return unsupported(fmt.Sprintf("json.Number %q", s), err) // unreachable for valid numbers
	}
	if math.IsInf(f, 0) {
		return unsupported(fmt.Sprintf("json.Number %s is beyond the range of a double", s), nil)
	}
	if isIntegerLiteral(s) && s != "-0" {
		if v, err := strconv.ParseInt(s, 10, 64); err == nil {
			return e.int(v)
		}
		return e.bigInteger(s, f)
	}
	e.buf = appendNumber(e.buf, f)
	return nil
}

// isIntegerLiteral reports whether valid JSON number s has neither a
// fraction nor an exponent.
func isIntegerLiteral(s string) bool {
	return !strings.ContainsAny(s, ".eE")
}

// validNumber reports whether s matches the JSON number grammar of RFC 8259:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	return i == len(s)
}

// isDigit reports whether c is an ASCII digit.
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// viaJSON canonicalizes a value of any other type by marshalling it with
// encoding/json and decoding the result with numbers kept as json.Number.
func (e *encoder) viaJSON(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return unsupported(fmt.Sprintf("encoding/json cannot marshal %T", v), err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	decoded, err := decode(dec, e.depth)
	if err != nil {
		return err
	}
	return e.value(decoded)
}

// decode reads one JSON value from dec into nil, bool, string, json.Number,
// []any or map[string]any, rejecting duplicate object names (RFC 8785
// requires I-JSON, which forbids them) and nesting past maxDepth.
func decode(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, unsupported("decoding encoding/json output", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth++; depth > maxDepth {
		return nil, unsupported(fmt.Sprintf("nesting deeper than %d levels", maxDepth), nil)
	}
	switch delim {
	case '[':
		arr := []any{}
		for dec.More() {
			elem, err := decode(dec, depth)
			if err != nil {
				return nil, prependIndex(err, len(arr))
			}
			arr = append(arr, elem)
		}
		if _, err := dec.Token(); err != nil {
			return nil, unsupported("decoding encoding/json output", err)
		}
		return arr, nil
	case '{':
		obj := map[string]any{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, unsupported("decoding encoding/json output", err)
			}
			key, _ := tok.(string) // the decoder guarantees a string here
			if _, dup := obj[key]; dup {
				return nil, prependKey(unsupported("duplicate object name", nil), key)
			}
			val, err := decode(dec, depth)
			if err != nil {
				return nil, prependKey(err, key)
			}
			obj[key] = val
		}
		if _, err := dec.Token(); err != nil {
			return nil, unsupported("decoding encoding/json output", err)
		}
		return obj, nil
	default:
		return nil, unsupported(fmt.Sprintf("unexpected JSON delimiter %q", delim), nil)
	}
}
