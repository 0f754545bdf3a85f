//go:build !race

package audit

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAppendJSONAllocs checks that AppendJSON does not allocate into a
// buffer that is large enough. The race detector changes allocation
// counts, hence the build tag.
func TestAppendJSONAllocs(t *testing.T) {
	for name, e := range goldenEvents() {
		t.Run(name, func(t *testing.T) {
			buf := make([]byte, 0, 1024)
			got := testing.AllocsPerRun(100, func() {
				buf = e.AppendJSON(buf[:0])
			})
			require.Zero(t, got)
		})
	}
}
