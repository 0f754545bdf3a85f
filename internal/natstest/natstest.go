// Package natstest runs real nats-server instances with JetStream for
// tests: embedded on a random loopback port with a fresh store directory,
// restartable on the same port and store, with optional user/password and
// TLS.
package natstest

import (
	"crypto/tls"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is an embedded nats-server with JetStream.
type Server struct {
	*server.Server
	opts *server.Options
	tb   testing.TB
}

// Option changes the server options before the first start.
type Option func(*server.Options)

// WithUser requires user/password authentication.
func WithUser(user, password string) Option {
	return func(o *server.Options) { o.Username, o.Password = user, password }
}

// WithTLS serves TLS with the given config (see NewTLS).
func WithTLS(cfg *tls.Config) Option {
	return func(o *server.Options) {
		o.TLS, o.TLSConfig, o.TLSTimeout = true, cfg, 5
	}
}

// WithMaxPayload sets the server's max payload, which also bounds KV values.
func WithMaxPayload(n int32) Option {
	return func(o *server.Options) { o.MaxPayload = n }
}

// Start starts a JetStream server on 127.0.0.1 with a random port and a
// store in a fresh temp dir, and shuts it down when the test ends.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	o := &server.Options{
		ServerName: "jetretry-test",
		Host:       "127.0.0.1",
		Port:       -1,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   tb.TempDir(),
		// Keep test servers small: they share a 2-core machine.
		JetStreamMaxMemory: 256 << 20,
		JetStreamMaxStore:  1 << 30,
	}
	for _, opt := range opts {
		opt(o)
	}
	s := &Server{opts: o, tb: tb}
	s.start()
	// Later restarts reuse the port the first start picked.
	o.Port = s.Addr().(*net.TCPAddr).Port
	tb.Cleanup(s.Shutdown)
	return s
}

func (s *Server) start() {
	s.tb.Helper()
	ns, err := server.NewServer(s.opts)
	if err != nil {
		s.tb.Fatalf("natstest: new server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		s.tb.Fatalf("natstest: server not ready")
	}
	s.Server = ns
}

// Shutdown stops the server and waits until it is down. The store stays.
func (s *Server) Shutdown() {
	if s.Server == nil {
		return
	}
	s.Server.Shutdown()
	s.Server.WaitForShutdown()
}

// Restart stops the server and starts it again on the same port and store.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Shutdown()
	s.start()
}

// Up starts a server that was shut down, on the same port and store.
func (s *Server) Up() {
	s.tb.Helper()
	s.start()
}

// URL is the client URL (nats:// or tls:// scheme as configured).
func (s *Server) URL() string {
	if s.opts.TLS {
		return fmt.Sprintf("tls://127.0.0.1:%d", s.opts.Port)
	}
	return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port)
}

// StoreDir is the JetStream store directory.
func (s *Server) StoreDir() string { return s.opts.StoreDir }

// Connect returns a client connection closed when the test ends. It uses
// the server's user/password if set.
func (s *Server) Connect(tb testing.TB, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	if s.opts.Username != "" {
		opts = append([]nats.Option{nats.UserInfo(s.opts.Username, s.opts.Password)}, opts...)
	}
	nc, err := nats.Connect(s.URL(), opts...)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a new connection.
func (s *Server) JetStream(tb testing.TB, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc := s.Connect(tb, opts...)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}
