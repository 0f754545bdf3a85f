package audit

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQueue(t *testing.T) {
	var q queue
	require.Equal(t, uint64(math.MaxUint64), q.minSeq())
	next, want := uint64(1), uint64(1)
	check := func(got []entry) {
		t.Helper()
		for _, e := range got {
			require.Equal(t, want, e.seq)
			want++
		}
	}
	// Interleave pushes and takes so the ring wraps and grows.
	for round := range 50 {
		for range round * 7 % 90 {
			q.push(entry{seq: next})
			next++
		}
		check(q.take(round*5%70, nil))
		if q.len() > 0 {
			require.Equal(t, want, q.minSeq())
		}
	}
	// prepend puts older entries first.
	rest := q.drain()
	require.Zero(t, q.len())
	q.push(entry{seq: next})
	q.prepend(rest)
	require.Equal(t, len(rest)+1, q.len())
	check(q.take(1<<20, nil))
	require.Equal(t, next+1, want)
	require.Zero(t, q.len())
}
