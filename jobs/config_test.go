package jobs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWorkerConfigDefaults(t *testing.T) {
	c, err := WorkerConfig{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 1, c.Concurrency)
	require.Equal(t, 2, c.Prefetch)
	require.Equal(t, 30*time.Second, c.Lease)
	require.Equal(t, DefaultPolicy().MaxAttempts, c.Policy.MaxAttempts)
	require.NotEmpty(t, c.Owner)

	c, err = WorkerConfig{Concurrency: 8, Prefetch: -1}.withDefaults()
	require.NoError(t, err)
	require.Zero(t, c.Prefetch)
	c, err = WorkerConfig{Concurrency: 8, Prefetch: 3}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, 3, c.Prefetch)
}

func TestWorkerConfigInvalid(t *testing.T) {
	for name, c := range map[string]WorkerConfig{
		"negative concurrency": {Concurrency: -1},
		"prefetch below -1":    {Prefetch: -2},
		"short lease":          {Lease: 500 * time.Millisecond},
		"negative max age":     {MaxAge: -time.Second},
		"missing deliveries":   {MissingDeliveries: -1},
		"negative sweep":       {SweepEvery: -time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.withDefaults()
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
}
