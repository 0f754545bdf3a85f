package jcs

import (
	"math/big"
	"strconv"
)

// appendNumber appends finite f as ECMAScript's Number::toString writes it
// (ECMA-262 section 6.1.6.1.20, the serialization RFC 8785 section 3.2.2.3
// adopts).
//
// With s the shortest decimal digits that round-trip to f, k their count
// and n the position of the decimal point relative to them (f = 0.s × 10^n),
// the forms are:
//
//	k <= n <= 21     digits, then n-k zeros          123000
//	0 < n <= 21      digits with a point inside      123.45
//	-6 < n <= 0      "0.", -n zeros, then digits     0.00123
//	otherwise        d[.ddd]e±(n-1)                  1.5e-7, 1e+21
func appendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // both +0 and -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}

	// strconv's shortest 'e' form is d[.ddd]e±XX (at least two exponent
	// digits); split it into digits and decimal exponent.
	var scratch [32]byte
	text := strconv.AppendFloat(scratch[:0], f, 'e', -1, 64)
	var digits [24]byte
	k := 0
	i := 0
	for ; text[i] != 'e'; i++ {
		if text[i] != '.' {
			digits[k] = text[i]
			k++
		}
	}
	i++ // skip 'e'
	negExp := text[i] == '-'
	exp := 0
	for i++; i < len(text); i++ {
		exp = exp*10 + int(text[i]-'0')
	}
	if negExp {
		exp = -exp
	}
	n := exp + 1
	d := digits[:k]

	switch {
	case k <= n && n <= 21:
		dst = append(dst, d...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		dst = append(dst, d[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, d...)
	default:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 < 0 {
			dst = append(dst, '-')
			dst = strconv.AppendInt(dst, int64(1-n), 10)
		} else {
			dst = append(dst, '+')
			dst = strconv.AppendInt(dst, int64(n-1), 10)
		}
	}
	return dst
}

// sameValue reports whether the decimal integer lit and the canonical
// number text canon denote exactly the same number. Both parse as exact
// rationals, so "10000000000000000000000" equals "1e+22" and
// "9007199254740993" does not equal "9007199254740992".
func sameValue(lit string, canon []byte) bool {
	a, ok1 := new(big.Rat).SetString(lit)
	b, ok2 := new(big.Rat).SetString(string(canon))
	return ok1 && ok2 && a.Cmp(b) == 0
}
