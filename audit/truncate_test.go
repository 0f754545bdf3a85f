package audit

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestTruncateMessage(t *testing.T) {
	keep := MaxMessageBytes - len("…") // bytes kept before the marker
	tests := []struct {
		name string
		s    string
		want string
	}{
		{name: "empty", s: "", want: ""},
		{name: "short", s: "Connection timeout", want: "Connection timeout"},
		{name: "exactly max", s: strings.Repeat("a", MaxMessageBytes), want: strings.Repeat("a", MaxMessageBytes)},
		{name: "one over", s: strings.Repeat("a", MaxMessageBytes+1), want: strings.Repeat("a", keep) + "…"},
		{name: "long ASCII", s: strings.Repeat("a", 10*MaxMessageBytes), want: strings.Repeat("a", keep) + "…"},
		{
			// "é" is 2 bytes: keep-1 ASCII bytes then é straddles the cut.
			name: "two-byte rune straddles cut",
			s:    strings.Repeat("a", keep-1) + "é" + strings.Repeat("b", 10),
			want: strings.Repeat("a", keep-1) + "…",
		},
		{
			name: "two-byte rune ends at cut",
			s:    strings.Repeat("a", keep-2) + "é" + strings.Repeat("b", 10),
			want: strings.Repeat("a", keep-2) + "é" + "…",
		},
		{
			// "🙂" is 4 bytes; its last byte would be the first one dropped.
			name: "four-byte rune straddles cut",
			s:    strings.Repeat("a", keep-3) + "🙂" + strings.Repeat("b", 10),
			want: strings.Repeat("a", keep-3) + "…",
		},
		{
			name: "all three-byte runes",
			s:    strings.Repeat("日", MaxMessageBytes),
			want: strings.Repeat("日", keep/3) + "…",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TruncateMessage(tt.s)
			require.Equal(t, tt.want, got)
			require.LessOrEqual(t, len(got), MaxMessageBytes)
			if utf8.ValidString(tt.s) {
				require.True(t, utf8.ValidString(got))
			}
		})
	}
}

func TestTruncateMessageInvalidUTF8(t *testing.T) {
	// Continuation bytes only: no rune start to back up to.
	got := TruncateMessage(strings.Repeat("\x80", 2*MaxMessageBytes))
	require.LessOrEqual(t, len(got), MaxMessageBytes)
	require.True(t, strings.HasSuffix(got, "…"))
}

func FuzzTruncateMessage(f *testing.F) {
	f.Add("short")
	f.Add(strings.Repeat("日本", MaxMessageBytes))
	f.Add(strings.Repeat("a", MaxMessageBytes-2) + "🙂🙂")
	f.Fuzz(func(t *testing.T, s string) {
		got := TruncateMessage(s)
		require.LessOrEqual(t, len(got), MaxMessageBytes)
		if len(s) <= MaxMessageBytes {
			require.Equal(t, s, got)
			return
		}
		kept := strings.TrimSuffix(got, "…")
		require.True(t, strings.HasPrefix(s, kept))
		require.GreaterOrEqual(t, len(kept), MaxMessageBytes-len("…")-(utf8.UTFMax-1))
		if utf8.ValidString(s) {
			require.True(t, utf8.ValidString(got))
		}
	})
}
