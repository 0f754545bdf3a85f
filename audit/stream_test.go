package audit_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
)

func TestEnsureStreamConfig(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx := testCtx(t, 10*time.Second)

	st, err := audit.EnsureStream(ctx, js, audit.StreamConfig{})
	require.NoError(t, err)
	got := st.CachedInfo().Config
	require.Equal(t, "JETRETRY_AUDIT", got.Name)
	require.Equal(t, []string{"jetretry.audit.>"}, got.Subjects)
	require.True(t, got.DenyDelete)
	require.True(t, got.DenyPurge)
	require.False(t, got.AllowRollup)
	require.Equal(t, 10*time.Minute, got.Duplicates)
	require.Zero(t, got.MaxAge)
	require.Equal(t, 1, got.Replicas)
	require.Equal(t, jetstream.FileStorage, got.Storage)

	// Again, with changes: an update.
	st, err = audit.EnsureStream(ctx, js, audit.StreamConfig{MaxAge: 24 * time.Hour, Duplicates: time.Hour})
	require.NoError(t, err)
	got = st.CachedInfo().Config
	require.Equal(t, 24*time.Hour, got.MaxAge)
	require.Equal(t, time.Hour, got.Duplicates)
	require.True(t, got.DenyDelete)
	require.True(t, got.DenyPurge)
}

func TestEnsureStreamInvalidConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  audit.StreamConfig
	}{
		{"name with dot", audit.StreamConfig{Name: "A.B"}},
		{"name with space", audit.StreamConfig{Name: "A B"}},
		{"prefix with wildcard", audit.StreamConfig{SubjectPrefix: "a.*"}},
		{"prefix with full wildcard", audit.StreamConfig{SubjectPrefix: "a.>"}},
		{"prefix with empty token", audit.StreamConfig{SubjectPrefix: "a..b"}},
		{"prefix trailing dot", audit.StreamConfig{SubjectPrefix: "a."}},
		{"replicas", audit.StreamConfig{Replicas: 7}},
		{"negative replicas", audit.StreamConfig{Replicas: -1}},
		{"negative max age", audit.StreamConfig{MaxAge: -time.Second}},
		{"negative duplicates", audit.StreamConfig{Duplicates: -time.Second}},
		{"duplicates over max age", audit.StreamConfig{MaxAge: time.Minute}},
		{"storage", audit.StreamConfig{Storage: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No server is needed: validation comes first.
			_, err := audit.EnsureStream(t.Context(), nil, tt.cfg)
			require.ErrorIs(t, err, audit.ErrInvalidConfig)
		})
	}
}

func TestStreamIsAppendOnly(t *testing.T) {
	e := newEnv(t)
	ctx := testCtx(t, 10*time.Second)
	ev := event(audit.TypeRetryAttempt, "RETRY_KV_GET", 1)
	_, err := e.js.Publish(ctx, audit.Subject(audit.DefaultSubjectPrefix, ev), ev.AppendJSON(nil))
	require.NoError(t, err)

	st, err := e.js.Stream(ctx, e.cfg.WithDefaults().Name)
	require.NoError(t, err)

	err = st.DeleteMsg(ctx, 1)
	require.ErrorIs(t, err, jetstream.ErrMsgDeleteUnsuccessful)
	require.ErrorContains(t, err, "message delete not permitted")

	err = st.SecureDeleteMsg(ctx, 1)
	require.ErrorIs(t, err, jetstream.ErrMsgDeleteUnsuccessful)

	err = st.Purge(ctx)
	require.ErrorContains(t, err, "purge not permitted")

	// A rollup header cannot wipe the subject either.
	m := nats.NewMsg("jetretry.audit.retry_attempt.RETRY_KV_GET")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = []byte(`{}`)
	_, err = e.js.PublishMsg(ctx, m)
	require.ErrorContains(t, err, "rollup not permitted")

	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}
