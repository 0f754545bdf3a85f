package kvx

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jetstream's rules (jetstream/kv.go), to check ours against.
var (
	jsKeyRe    = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)
	jsBucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

func jsKeyValid(key string) bool {
	if len(key) == 0 || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	return jsKeyRe.MatchString(key)
}

func TestValidKeyAndBucketMatchJetStream(t *testing.T) {
	inputs := []string{
		"", "a", "A.b", "a.b.c", ".a", "a.", "a..b", "a/b=c_d-e", "a b", "a*", "a>", "a\tb",
		"é", "a.b.", "..", ".", "0", "=", "a/./b", "a:b", "a,b", "a$b", strings.Repeat("k", 300),
	}
	for _, in := range inputs {
		t.Run(in, func(t *testing.T) {
			require.Equal(t, jsKeyValid(in), validKey(in), "key %q", in)
			require.Equal(t, in != "" && jsBucketRe.MatchString(in), validBucket(in), "bucket %q", in)
		})
	}
}
