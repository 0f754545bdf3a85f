package jsonx

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote\back`, "\n\r\t\b\f\x00\x1f", "<&>", "é🚀", "\u2028\u2029", "bad\xffutf8\xc3"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(s))
		require.Equal(t, string(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), string(AppendString(nil, s)), "%q", s)
	}
}

func TestFields(t *testing.T) {
	var got []string
	ok := Fields([]byte(` { "a" : 1 , "b":{"c":[1,"x]"]},"d":"e" } `), func(name, raw []byte) bool {
		got = append(got, string(name)+"="+string(raw))
		return true
	})
	require.True(t, ok)
	require.Equal(t, []string{"a=1", `b={"c":[1,"x]"]}`, `d="e"`}, got)

	for _, doc := range []string{``, `[]`, `{`, `{"a"}`, `{"a":1,}`, `{"a":1} x`, `{"a\u0062":1}`, `{"a` + "\x01" + `":1}`, `{"a":1 "b":2}`} {
		require.False(t, Fields([]byte(doc), func(_, _ []byte) bool { return true }), doc)
	}
	require.True(t, Fields([]byte(`{}`), func(_, _ []byte) bool { return false }))
	require.False(t, Fields([]byte(`{"a":1}`), func(_, _ []byte) bool { return false }))
}

func TestPlainString(t *testing.T) {
	s, end, ok := PlainString([]byte(`"abc",`), 0)
	require.True(t, ok)
	require.Equal(t, "abc", s)
	require.Equal(t, 5, end)
	for _, in := range []string{`"a\"b"`, `"a`, `abc`, "\"a\x1fb\"", "\"\xff\""} {
		_, _, ok := PlainString([]byte(in), 0)
		require.False(t, ok, "%q", in)
	}
}
