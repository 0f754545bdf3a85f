package test

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

func TestNATSXConnectUserPassword(t *testing.T) {
	s := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	ctx := testCtx(t)

	t.Run("right password", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		nc, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: s.URL(), User: "alice", Password: "s3cret", Name: "jetretry-test"})
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		require.True(t, nc.IsConnected())
		require.Zero(t, mem.Len())
	})

	t.Run("wrong password is permanent", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		nc, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: s.URL(), User: "alice", Password: "wrong"},
			retry.WithTenant("t1"), retry.WithCorrelation("c1"))
		require.Nil(t, nc)
		require.ErrorIs(t, err, nats.ErrAuthorization)
		requireRetryError(t, err, retry.StopPermanent, 1)
		require.Empty(t, eventsOf(mem, audit.TypeRetryAttempt))
		e := requireExhaustedEvent(t, mem, categories.NATSConnect, "permanent", 1, "nats.ErrAuthorization")
		require.Equal(t, "t1", e.TenantID)
		require.Equal(t, "c1", e.CorrelationID)
		require.Equal(t, "connect to "+s.URL(), e.Operation)
		require.NotContains(t, e.FinalExceptionMessage, "wrong")
	})
}

func TestNATSXConnectRedactsURLCredentials(t *testing.T) {
	s := natstest.Start(t, natstest.WithUser("alice", "s3cret"))
	mgr, mem := fastManager(t, nil)
	url := "nats://alice:wrong@" + s.Addr().String()
	_, err := natsx.Connect(testCtx(t), mgr, natsx.ConnectConfig{URL: url})
	require.ErrorIs(t, err, nats.ErrAuthorization)
	e := requireExhaustedEvent(t, mem, categories.NATSConnect, "permanent", 1, "nats.ErrAuthorization")
	require.Equal(t, "connect to nats://"+s.Addr().String(), e.Operation)
	require.NotContains(t, err.Error(), "wrong")
}

func TestNATSXConnectTLS(t *testing.T) {
	files := natstest.NewTLS(t)
	s := natstest.Start(t, natstest.WithTLS(files.Server))
	ctx := testCtx(t)

	t.Run("with the CA", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		nc, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: s.URL(), TLS: natsx.TLSConfig{CAFile: files.CAFile}})
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		require.True(t, nc.IsConnected())
		_, err = nc.TLSConnectionState()
		require.NoError(t, err)
		require.Zero(t, mem.Len())
	})

	t.Run("without the CA the certificate error is permanent", func(t *testing.T) {
		mgr, mem := fastManager(t, nil)
		_, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: s.URL()})
		var unknown x509.UnknownAuthorityError
		require.ErrorAs(t, err, &unknown)
		requireRetryError(t, err, retry.StopPermanent, 1)
		requireExhaustedEvent(t, mem, categories.NATSConnect, "permanent", 1, "x509.UnknownAuthorityError")
	})
}

func TestNATSXConnectRetriesUntilServerIsUp(t *testing.T) {
	s := natstest.Start(t)
	url := s.URL()
	s.Shutdown()

	// Up to 100 attempts, 20-50 ms apart: bounded, and long enough for
	// the server to come back.
	p := fastPolicy(100)
	p.BaseDelay, p.MaxDelay = 20*time.Millisecond, 50*time.Millisecond
	mgr, mem := fastManager(t, map[retry.Category]retry.Policy{categories.NATSConnect: p})

	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := natsx.Connect(testCtx(t), mgr, natsx.ConnectConfig{URL: url, Timeout: time.Second})
		done <- result{nc, err}
	}()

	// Bring the server up once Connect has failed at least twice.
	require.Eventually(t, func() bool { return len(eventsOf(mem, audit.TypeRetryAttempt)) >= 2 }, 10*time.Second, 5*time.Millisecond)
	s.Up()

	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Connect did not return")
	}
	require.NoError(t, r.err)
	t.Cleanup(r.nc.Close)
	require.True(t, r.nc.IsConnected())

	attempts := eventsOf(mem, audit.TypeRetryAttempt)
	require.GreaterOrEqual(t, len(attempts), 2)
	for i, e := range attempts {
		require.Equal(t, string(categories.NATSConnect), e.Category)
		require.Equal(t, i+1, e.AttemptNumber)
		require.Equal(t, 100, e.MaxAttempts)
		require.Equal(t, "nats.ErrNoServers", e.ExceptionType)
	}
	require.Empty(t, eventsOf(mem, audit.TypeRetryExhausted))
}

func TestNATSXConnectGivesUpWhenServerStaysDown(t *testing.T) {
	s := natstest.Start(t)
	url := s.URL()
	s.Shutdown()
	mgr, mem := fastManager(t, nil)
	_, err := natsx.Connect(testCtx(t), mgr, natsx.ConnectConfig{URL: url})
	require.ErrorIs(t, err, retry.ErrExhausted)
	require.ErrorIs(t, err, nats.ErrNoServers)
	requireRetryError(t, err, retry.StopExhausted, 5) // seed 002: 5 attempts
	require.Len(t, eventsOf(mem, audit.TypeRetryAttempt), 4)
	requireExhaustedEvent(t, mem, categories.NATSConnect, "exhausted", 5, "nats.ErrNoServers")
}

func TestNATSXConnectHonoursNATSURL(t *testing.T) {
	s := natstest.Start(t)
	t.Setenv(natsx.EnvURL, s.URL())
	mgr, _ := fastManager(t, nil)
	nc, err := natsx.Connect(testCtx(t), mgr, natsx.ConnectConfig{})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.Equal(t, s.URL(), nc.ConnectedUrl())
}

func TestNATSXConnectStopsWithContext(t *testing.T) {
	s := natstest.Start(t)
	url := s.URL()
	s.Shutdown()
	p := fastPolicy(1000)
	mgr, _ := fastManager(t, map[retry.Category]retry.Policy{categories.NATSConnect: p})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{URL: url})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestNATSXConnectBadConfig(t *testing.T) {
	dir := t.TempDir()
	seed := filepath.Join(dir, "bad.nk")
	require.NoError(t, os.WriteFile(seed, []byte("not a seed"), 0o600))
	missing := filepath.Join(dir, "missing")

	tests := []struct {
		name  string
		cfg   natsx.ConnectConfig
		field string
	}{
		{"token and user", natsx.ConnectConfig{Token: "t", User: "u", Password: "p"}, "Token"},
		{"creds and nkey", natsx.ConnectConfig{CredsFile: seed, NKeySeedFile: seed}, "NKeySeedFile"},
		{"user without password", natsx.ConnectConfig{User: "u"}, "Password"},
		{"password without user", natsx.ConnectConfig{Password: "p"}, "User"},
		{"missing creds file", natsx.ConnectConfig{CredsFile: missing}, "CredsFile"},
		{"bad creds file", natsx.ConnectConfig{CredsFile: seed}, "CredsFile"},
		{"bad nkey seed file", natsx.ConnectConfig{NKeySeedFile: seed}, "NKeySeedFile"},
		{"missing CA file", natsx.ConnectConfig{TLS: natsx.TLSConfig{CAFile: missing}}, "TLS.CAFile"},
		{"bad CA file", natsx.ConnectConfig{TLS: natsx.TLSConfig{CAFile: seed}}, "TLS.CAFile"},
		{"cert without key", natsx.ConnectConfig{TLS: natsx.TLSConfig{CertFile: seed}}, "TLS.CertFile"},
		{"bad scheme", natsx.ConnectConfig{URL: "http://127.0.0.1:4222"}, "URL"},
		{"empty list entry", natsx.ConnectConfig{URL: "nats://127.0.0.1:4222,,"}, "URL"},
		{"negative timeout", natsx.ConnectConfig{Timeout: -time.Second}, "Timeout"},
		{"nil option", natsx.ConnectConfig{Options: []nats.Option{nil}}, "Options"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mgr, mem := fastManager(t, nil)
			nc, err := natsx.Connect(testCtx(t), mgr, tt.cfg)
			require.Nil(t, nc)
			require.ErrorIs(t, err, natsx.ErrInvalidConfig)
			var ce *natsx.ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tt.field, ce.Field, "%v", err)
			require.Zero(t, mem.Len(), "no attempt, no event")
		})
	}
}
