package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/internal/natstest"
)

func TestRestartKeepsStreamsAndPort(t *testing.T) {
	s := natstest.Start(t)
	url := s.URL()
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "t.a", []byte("x"))
	require.NoError(t, err)

	s.Restart()
	require.Equal(t, url, s.URL())
	_, js2 := s.JetStream(t)
	st, err := js2.Stream(ctx, "T")
	require.NoError(t, err)
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

func TestUserPassword(t *testing.T) {
	s := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	_, err := nats.Connect(s.URL())
	require.Error(t, err)
	nc := s.Connect(t)
	require.True(t, nc.IsConnected())
}
