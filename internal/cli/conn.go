package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/natsx"
	"github.com/jetretry/jetretry/retry"
)

// connFlags are the connection flags every command that talks to NATS
// takes. An empty --server means $NATS_URL, then nats://127.0.0.1:4222.
type connFlags struct {
	server, creds, nkey, user, password, token string
	tlsCA, tlsCert, tlsKey                     string
	timeout                                    time.Duration
}

// register adds the connection flags to fs.
func (c *connFlags) register(fs *flagSet) {
	fs.StringVar(&c.server, "server", "", "NATS server URL(s), comma-separated (default $NATS_URL, then nats://127.0.0.1:4222)")
	fs.StringVar(&c.creds, "creds", "", "NATS credentials `file`")
	fs.StringVar(&c.nkey, "nkey", "", "NATS nkey seed `file`")
	fs.StringVar(&c.user, "user", "", "user name (with --password)")
	fs.StringVar(&c.password, "password", "", "password (with --user)")
	fs.StringVar(&c.token, "token", "", "authentication token")
	fs.StringVar(&c.tlsCA, "tlsca", "", "TLS CA certificate `file`")
	fs.StringVar(&c.tlsCert, "tlscert", "", "TLS client certificate `file`")
	fs.StringVar(&c.tlsKey, "tlskey", "", "TLS client key `file`")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "how long to try to reach the server")
}

// config returns the natsx connection config of the flags.
func (c *connFlags) config(name string) natsx.ConnectConfig {
	return natsx.ConnectConfig{
		URL: c.server, Name: name, CredsFile: c.creds, NKeySeedFile: c.nkey,
		User: c.user, Password: c.password, Token: c.token,
		TLS: natsx.TLSConfig{CAFile: c.tlsCA, CertFile: c.tlsCert, KeyFile: c.tlsKey},
	}
}

// connect dials NATS under the NATS_CONNECT policy, bounded by --timeout,
// and returns the connection and a JetStream context. A bad flag
// combination is a usage error; a server that cannot be reached is an
// operation failure with a one-line message.
func (c *connFlags) connect(ctx context.Context, name string, mgr *retry.Manager) (*nats.Conn, jetstream.JetStream, error) {
	if c.timeout <= 0 {
		return nil, nil, usagef("--timeout must be positive")
	}
	if mgr == nil {
		var err error
		// A CLI gives up sooner than a service: at most --timeout.
		if mgr, err = categories.NewManager(); err != nil {
			return nil, nil, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cfg := c.config(name)
	nc, err := natsx.Connect(cctx, mgr, cfg, retry.WithPolicy(retry.Policy{
		MaxAttempts: 100, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second, Multiplier: 2, JitterFactor: 0.1,
	}))
	if err != nil {
		var ce *natsx.ConfigError
		if errors.As(err, &ce) {
			return nil, nil, usagef("%v", err)
		}
		return nil, nil, fmt.Errorf("cannot reach NATS at %s: %w", displayURL(cfg.URL), rootCause(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// displayURL names the server for messages.
func displayURL(u string) string {
	if u == "" {
		return "$NATS_URL or " + nats.DefaultURL
	}
	return u
}

// rootCause returns the innermost error of a retry.Error, for one-line
// messages.
func rootCause(err error) error {
	var re *retry.Error
	if errors.As(err, &re) && re.Cause != nil {
		return re.Cause
	}
	return err
}
