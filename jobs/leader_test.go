package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/internal/natstest"
)

func TestAPIPrefix(t *testing.T) {
	require.Equal(t, "$JS.API.", apiPrefix(jetstream.JetStreamOptions{}))
	require.Equal(t, "$JS.hub.API.", apiPrefix(jetstream.JetStreamOptions{Domain: "hub"}))
	require.Equal(t, "acme.API.", apiPrefix(jetstream.JetStreamOptions{APIPrefix: "acme.API"}))
	require.Equal(t, "acme.API.", apiPrefix(jetstream.JetStreamOptions{APIPrefix: "acme.API."}))
}

// On a replicated bucket, a read from the stream's leader returns what a
// direct get returns once the replicas agree: the record and its
// revision, or ErrNotFound for a missing or deleted key.
func TestGetFromLeader(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	nc, err := nats.Connect(natstest.ClusterURL(servers))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := New(ctx, js, Config{Replicas: 3})
	require.NoError(t, err)
	require.NotNil(t, c.leader, "a replicated bucket is read from its leader when it matters")

	rec, _, err := c.Submit(ctx, "lead", "lead/1", []byte("p"), SubmitOptions{})
	require.NoError(t, err)
	got, rev, err := c.getFromLeader(ctx, rec.ID)
	require.NoError(t, err)
	_, wantRev, err := c.get(ctx, rec.ID)
	require.NoError(t, err)
	require.Equal(t, wantRev, rev)
	require.Equal(t, rec.Key, got.Key)
	require.Equal(t, rec.Dispatch, got.Dispatch)
	require.Equal(t, []byte("p"), got.Payload)

	_, _, err = c.getFromLeader(ctx, ID("lead/missing"))
	require.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, c.kv.Delete(ctx, rec.ID))
	_, _, err = c.getFromLeader(ctx, rec.ID)
	require.ErrorIs(t, err, ErrNotFound)

	// One replica: no leader reads; getFromLeader is get.
	single := natstest.Start(t)
	_, sjs := single.JetStream(t)
	sc, err := New(ctx, sjs, Config{})
	require.NoError(t, err)
	require.Nil(t, sc.leader)
}
