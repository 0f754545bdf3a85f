package audit_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
)

// subjectMatches reports whether the NATS filter matches the literal
// subject, token by token.
func subjectMatches(filter, subject string) bool {
	ft, st := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, f := range ft {
		if f == ">" {
			return len(st) > i
		}
		if i >= len(st) || (f != "*" && f != st[i]) {
			return false
		}
	}
	return len(ft) == len(st)
}

func TestSubjectSanitizesHostileTokens(t *testing.T) {
	const prefix = "jetretry.audit"
	hostile := []string{
		"", "*", ">", ".", "..", "a.b", "a.*.>", "has space", "tab\there", "new\nline",
		"\r\n", "\x00nul", "ünïcödé", "emoji🔥", "\xff\xfe invalid", "日本語", "RETRY_NATS_PUBLISH",
		"x" + strings.Repeat("y", 500), strings.Repeat("🔥", 200),
	}
	for _, typ := range hostile {
		for _, cat := range hostile {
			e := audit.Event{Type: audit.Type(typ), Category: cat}
			got := audit.Subject(prefix, e)
			tokens := strings.Split(got, ".")
			require.Len(t, tokens, 4, "subject %q", got)
			require.Equal(t, "jetretry", tokens[0])
			require.Equal(t, "audit", tokens[1])
			for _, tok := range tokens[2:] {
				require.NotEmpty(t, tok)
				require.LessOrEqual(t, len(tok), audit.MaxSubjectTokenBytes)
				for i := 0; i < len(tok); i++ {
					c := tok[i]
					ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
					require.True(t, ok, "byte %q in token %q", c, tok)
				}
			}
			require.Equal(t, got, audit.Subject(prefix, e), "deterministic")
			require.True(t, subjectMatches(audit.FilterSubject(prefix, "", cat), got), "category filter for %q", cat)
			require.True(t, subjectMatches(audit.FilterSubject(prefix, e.Type, cat), got))
			require.True(t, subjectMatches(audit.FilterSubject(prefix, e.Type, ""), got))
		}
	}
}

func TestSubjectTokens(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"clean", "RETRY_KV_GET", "RETRY_KV_GET"},
		{"empty", "", "_"},
		{"dot", "a.b", "a_b"},
		{"wildcards", "*>", "__"},
		{"space and tab", "a b\tc", "a_b_c"},
		{"rune becomes one byte", "é🔥x", "__x"},
		{"invalid utf-8 byte by byte", "\xff\xfea", "__a"},
		{"capped", strings.Repeat("a", 200), strings.Repeat("a", audit.MaxSubjectTokenBytes)},
		{"capped after sanitizing", strings.Repeat("é", 200), strings.Repeat("_", audit.MaxSubjectTokenBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := audit.Subject("p", audit.Event{Type: audit.TypeIdempotency, Category: tt.in})
			require.Equal(t, "p.idempotency."+tt.want, got)
		})
	}
	require.Equal(t, "p.*.*", audit.FilterSubject("p", "", ""))
}
