#!/usr/bin/env python3
"""Cross-check key_vectors.json without any Go code.

Check 1 (stdlib only) rebuilds each canonical form with
json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False),
which equals RFC 8785 output when the data holds no floats, only integers
of magnitude <= 2**53, and no object names with characters above U+FFFF
(Python sorts names by code point, RFC 8785 by UTF-16 code unit). Vectors
outside that subset are reported as skipped.

Check 2 runs a small independent RFC 8785 serializer (numbers via Python's
shortest repr plus the ECMAScript layout rules, names sorted by UTF-16
code units) over every vector, including the ones check 1 skips.

Both checks also recompute the key as the SHA-256 of the canonical UTF-8.
Exits 1 on any mismatch. Usage: python3 verify_vectors.py [key_vectors.json]
"""

import decimal
import hashlib
import json
import math
import os
import struct
import sys


class _Float(float):
    """Marks numbers that had a fraction or exponent in the JSON text."""


def envelope(v):
    params = v["additional_params"]
    return {
        "additional_params": {} if params is None else params,
        "correlation_id": v["correlation_id"],
        "operation": v["operation"],
        "tenant_id": v["tenant_id"],
    }


def stdlib_skip_reason(value):
    """Why check 1 cannot reproduce value, or None."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, _Float):
        return "has floats"
    if isinstance(value, int):
        return None if abs(value) <= 2**53 else "has integers beyond 2^53"
    if isinstance(value, list):
        for item in value:
            reason = stdlib_skip_reason(item)
            if reason:
                return reason
        return None
    for name, item in value.items():
        if any(ord(ch) > 0xFFFF for ch in name):
            return "has object names above U+FFFF"
        reason = stdlib_skip_reason(item)
        if reason:
            return reason
    return None


def stdlib_canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def es_number(x):
    """ECMAScript Number::toString for a finite double (RFC 8785 3.2.2.3)."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError("no JSON form for %r" % x)
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    # repr gives the shortest round-tripping digits.
    t = decimal.Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, t.digits))
    k = len(digits)
    n = k + t.exponent  # value = 0.digits * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mant = digits[0] + ("." + digits[1:] if k > 1 else "")
        body = mant + "e" + ("+" if e >= 0 else "-") + str(abs(e))
    return sign + body


def es_string(s):
    out = ['"']
    short = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    for ch in s:
        if ch in short:
            out.append(short[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def jcs(value):
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return es_string(value)
    if isinstance(value, (int, float)):
        f = float(value)
        if isinstance(value, int) and not isinstance(value, _Float) and int(f) != value:
            # Integer literals must survive conversion to a double.
            if decimal.Decimal(es_number(f)) != value:
                raise ValueError("integer %d is not exact as a double" % value)
        return es_number(f)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v) for v in value) + "]"
    names = sorted(value, key=lambda s: s.encode("utf-16-be"))
    return "{" + ",".join(es_string(k) + ":" + jcs(value[k]) for k in names) + "}"


def sha256_hex(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# RFC 8785 Appendix B samples: IEEE 754 bits -> canonical text. They check
# es_number itself before it is trusted with the vectors.
RFC8785_NUMBERS = [
    ("0000000000000001", "5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af6", "1e+23"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555554", "333333333.33333325"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def self_test():
    bad = 0
    for bits, want in RFC8785_NUMBERS:
        got = es_number(struct.unpack(">d", bytes.fromhex(bits))[0])
        if got != want:
            print("FAIL  es_number self-test %s: got %s, want %s" % (bits, got, want))
            bad += 1
    return bad


def main():
    if self_test():
        return 1
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "key_vectors.json")
    with open(path, encoding="utf-8") as f:
        vectors = json.load(f, parse_float=_Float)
    failures = 0
    checked1 = checked2 = 0
    for v in vectors:
        name = v["name"]
        env = envelope(v)
        want_canon, want_key = v["canonical"], v["key"]
        if sha256_hex(want_canon) != want_key:
            print("FAIL  %-45s key is not sha256(canonical)" % name)
            failures += 1

        reason = stdlib_skip_reason(env)
        if reason:
            print("skip  %-45s check 1 (json.dumps): %s" % (name, reason))
        else:
            got = stdlib_canonical(env)
            checked1 += 1
            if got != want_canon or sha256_hex(got) != want_key:
                print("FAIL  %-45s check 1 (json.dumps)\n  got  %r\n  want %r" % (name, got, want_canon))
                failures += 1
            else:
                print("ok    %-45s check 1 (json.dumps)" % name)

        got = jcs(env)
        checked2 += 1
        if got != want_canon or sha256_hex(got) != want_key:
            print("FAIL  %-45s check 2 (python jcs)\n  got  %r\n  want %r" % (name, got, want_canon))
            failures += 1
        else:
            print("ok    %-45s check 2 (python jcs)" % name)

    print("%d vectors: check 1 verified %d (skipped %d), check 2 verified %d, %d failures"
          % (len(vectors), checked1, len(vectors) - checked1, checked2, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
