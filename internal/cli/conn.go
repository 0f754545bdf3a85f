package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
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

// connFlagNames are the names register adds.
var connFlagNames = []string{"server", "creds", "nkey", "user", "password", "token", "tlsca", "tlscert", "tlskey", "timeout"}

// register adds the connection flags to fs; its help lists them apart.
func (c *connFlags) register(fs *flagSet) {
	if fs.conn == nil {
		fs.conn = make(map[string]bool, len(connFlagNames))
	}
	for _, n := range connFlagNames {
		fs.conn[n] = true
	}
	fs.StringVar(&c.server, "server", "", "NATS server URL(s), comma-separated (default $NATS_URL, then nats://127.0.0.1:4222)")
	fs.StringVar(&c.creds, "creds", "", "NATS credentials `file`")
	fs.StringVar(&c.nkey, "nkey", "", "NATS nkey seed `file`")
	fs.StringVar(&c.user, "user", "", "user name (with --password)")
	fs.StringVar(&c.password, "password", "", "password (with --user)")
	fs.StringVar(&c.token, "token", "", "authentication token")
	fs.StringVar(&c.tlsCA, "tlsca", "", "TLS CA certificate `file`")
	fs.StringVar(&c.tlsCert, "tlscert", "", "TLS client certificate `file`")
	fs.StringVar(&c.tlsKey, "tlskey", "", "TLS client key `file`")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Second, "how long to keep trying to reach the server")
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
	if err := c.check(); err != nil {
		return nil, nil, err
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
			flags := map[string]string{
				"URL": "--server", "CredsFile": "--creds", "NKeySeedFile": "--nkey",
				"TLS.CAFile": "--tlsca", "TLS.CertFile": "--tlscert", "TLS.KeyFile": "--tlskey",
			}
			if f, ok := flags[ce.Field]; ok && ce.Err != nil {
				// "--creds cannot be read: stat x: no such file or directory"
				return nil, nil, usagef("%s %s: %v", f, ce.Reason, ce.Err)
			}
			return nil, nil, usagef("%v", err)
		}
		return nil, nil, fmt.Errorf("cannot reach NATS at %s: %w", c.displayURL(), rootCause(err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// check reports bad flag combinations as usage errors named by flag, before
// natsx checks the config it is given.
func (c *connFlags) check() error {
	var auth []string
	for _, f := range []struct{ flag, value string }{
		{"--creds", c.creds}, {"--nkey", c.nkey}, {"--user", c.user + c.password}, {"--token", c.token},
	} {
		if f.value != "" {
			auth = append(auth, f.flag)
		}
	}
	switch {
	case c.timeout <= 0:
		return usagef("--timeout must be positive")
	case len(auth) > 1:
		return usagef("%s cannot be combined with %s: use one way to authenticate", auth[1], auth[0])
	case c.user != "" && c.password == "":
		return usagef("--password is required with --user")
	case c.user == "" && c.password != "":
		return usagef("--user is required with --password")
	case (c.tlsCert == "") != (c.tlsKey == ""):
		return usagef("--tlscert and --tlskey go together")
	}
	return nil
}

// displayURL names the server the flags point at, for messages.
func (c *connFlags) displayURL() string { return displayURL(c.server) }

// displayURL names the server of the URL list u, for messages: u, else
// $NATS_URL, else the default, with passwords redacted.
func displayURL(u string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		u = strings.TrimSpace(os.Getenv(natsx.EnvURL))
	}
	if u == "" {
		return nats.DefaultURL
	}
	list := strings.Split(u, ",")
	for i, s := range list {
		s = strings.TrimSpace(s)
		if p, err := url.Parse(s); err == nil && p.User != nil {
			s = p.Redacted()
		}
		list[i] = s
	}
	return strings.Join(list, ",")
}

// jsError turns an error of a JetStream call made after connecting into a
// one-line message naming the server: JetStream disabled, no answer in
// time, or a permission error. what says what was being done. Errors it
// does not recognize are returned as they are.
func (c *connFlags) jsError(what string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("%s: JetStream is not enabled at %s (start nats-server with -js, or run \"jetretry server\")", what, c.displayURL())
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%s: NATS at %s did not answer in time", what, c.displayURL())
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionDraining):
		return fmt.Errorf("%s: lost the connection to NATS at %s", what, c.displayURL())
	}
	return fmt.Errorf("%s: %w", what, err)
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
