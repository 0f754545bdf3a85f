package idempotency_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/idempotency/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(_ *testing.T, now func() time.Time) idempotency.Store {
		return idempotency.NewMemory(now, 0)
	})
}

func TestMemoryZeroValue(t *testing.T) {
	var m idempotency.Memory
	c, err := m.Claim(context.Background(), "k", "fp", time.Second)
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, c.Status)
}

func TestMemoryRetention(t *testing.T) {
	clk := &storetest.Clock{}
	m := idempotency.NewMemory(clk.Now, time.Hour)
	ctx := context.Background()
	c, err := m.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	require.NoError(t, m.Complete(ctx, c, []byte(`1`)))
	clk.Advance(59 * time.Minute)
	hit, err := m.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.Completed, hit.Status)
	clk.Advance(time.Minute)
	_, err = m.Get(ctx, "k")
	require.ErrorIs(t, err, idempotency.ErrNotFound, "completed records expire after the retention")
	fresh, err := m.Claim(ctx, "k", "fp", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idempotency.Claimed, fresh.Status)
}
