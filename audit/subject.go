package audit

import "strings"

// MaxSubjectTokenBytes bounds the length of each token that Subject builds
// from an event's type and category.
const MaxSubjectTokenBytes = 128

// Subject returns the subject an event is published on:
// "<prefix>.<event_type>.<retry_category>".
//
// Both tokens are sanitized so that no text in an event can change the
// shape of the subject: every byte outside A-Z, a-z, 0-9, '-' and '_'
// (so '.', '*', '>', whitespace, control characters) becomes '_', as does
// every non-ASCII rune and every byte of invalid UTF-8; an empty token
// becomes "_"; a token is cut to MaxSubjectTokenBytes. The subject thus
// always has the prefix's tokens plus exactly two, and no wildcard.
// Sanitizing is deterministic but not one-to-one ("a.b" and "a_b" share a
// subject), so readers filter on the decoded fields as well.
//
// prefix is used as given; StreamConfig.Validate and
// PublisherConfig.Validate check it.
func Subject(prefix string, e Event) string {
	return subject(prefix, e.Type, e.Category)
}

// FilterSubject returns the subject filter that matches the events of type
// t and category published by Subject with the same prefix. An empty t or
// category matches any value of that token ("*").
func FilterSubject(prefix string, t Type, category string) string {
	tt, ct := "*", "*"
	if t != "" {
		tt = subjectToken(string(t))
	}
	if category != "" {
		ct = subjectToken(category)
	}
	return prefix + "." + tt + "." + ct
}

func subject(prefix string, t Type, category string) string {
	return prefix + "." + subjectToken(string(t)) + "." + subjectToken(category)
}

// subjectToken sanitizes s into one subject token, as documented on
// Subject. It returns s itself, without allocating, when s is already a
// valid token.
func subjectToken(s string) string {
	if s == "" {
		return "_"
	}
	clean := len(s) <= MaxSubjectTokenBytes
	for i := 0; clean && i < len(s); i++ {
		clean = tokenByte(s[i])
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), MaxSubjectTokenBytes))
	// Ranging over a string yields one RuneError per invalid byte, so
	// every rune and every bad byte becomes exactly one output byte.
	for _, r := range s {
		if b.Len() == MaxSubjectTokenBytes {
			break
		}
		if r < 0x80 && tokenByte(byte(r)) {
			b.WriteByte(byte(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}
