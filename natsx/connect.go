package natsx

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// EnvURL is the environment variable Connect reads the server URL from when
// ConnectConfig.URL is empty.
const EnvURL = "NATS_URL"

// DefaultConnectTimeout bounds one connection attempt (dial, TLS and
// protocol handshake) when ConnectConfig.Timeout is zero. The attempt's
// context deadline shortens it.
const DefaultConnectTimeout = nats.DefaultTimeout

// TLSConfig names the PEM files of a TLS connection. Certificate
// verification cannot be turned off here; pass a nats.Secure option in
// ConnectConfig.Options if you must.
type TLSConfig struct {
	// CAFile holds the certificate authorities that sign the server's
	// certificate. Empty means the system roots.
	CAFile string
	// CertFile and KeyFile hold the client certificate and its key, for
	// servers that verify clients (mutual TLS). Set both or neither.
	CertFile string
	KeyFile  string
}

// enabled reports whether any TLS file is set.
func (t TLSConfig) enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ConnectConfig says how Connect reaches and authenticates to NATS. It is a
// plain value; the zero value connects to $NATS_URL, or to
// nats.DefaultURL (nats://127.0.0.1:4222) when that is unset, without
// authentication.
//
// At most one authentication method may be set: CredsFile, NKeySeedFile,
// User and Password, or Token.
type ConnectConfig struct {
	// URL is the server URL, or a comma-separated list of them, such as
	// "nats://a:4222,nats://b:4222". The schemes are nats, tls, ws and
	// wss. Empty means $NATS_URL, then nats.DefaultURL.
	URL string
	// Name is the client name servers show in monitoring. Empty means
	// none.
	Name string
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed).
	CredsFile string
	// NKeySeedFile is a file holding an nkey user seed.
	NKeySeedFile string
	// User and Password authenticate with a user name and password. Set
	// both or neither.
	User     string
	Password string
	// Token authenticates with a token.
	Token string
	// TLS configures TLS. A tls:// URL uses TLS with the system roots even
	// when it is empty.
	TLS TLSConfig
	// Timeout bounds each connection attempt. Zero means
	// DefaultConnectTimeout; the attempt's context deadline, when
	// earlier, wins.
	Timeout time.Duration
	// Options are extra nats.go options, applied after the ones above so
	// that they can override them (a reconnect policy, handlers, ...). Do
	// not pass nats.RetryOnFailedConnect: Connect retries itself, under the
	// NATS_CONNECT policy.
	Options []nats.Option
}

// withDefaults returns c with URL and Timeout filled in. getenv looks up
// environment variables.
func (c ConnectConfig) withDefaults(getenv func(string) string) ConnectConfig {
	if strings.TrimSpace(c.URL) == "" {
		c.URL = getenv(EnvURL)
	}
	if strings.TrimSpace(c.URL) == "" {
		c.URL = nats.DefaultURL
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultConnectTimeout
	}
	return c
}

// validate checks c, with defaults applied, without touching the network:
// URLs parse, at most one authentication method is set, files exist. It
// returns a *ConfigError.
func (c ConnectConfig) validate() error {
	for _, u := range strings.Split(c.URL, ",") {
		if _, err := parseServerURL(u); err != nil {
			return &ConfigError{Field: "URL", Reason: "is not a server URL list", Err: err}
		}
	}
	var methods []string
	if c.CredsFile != "" {
		methods = append(methods, "CredsFile")
	}
	if c.NKeySeedFile != "" {
		methods = append(methods, "NKeySeedFile")
	}
	if c.User != "" || c.Password != "" {
		methods = append(methods, "User")
	}
	if c.Token != "" {
		methods = append(methods, "Token")
	}
	if len(methods) > 1 {
		return &ConfigError{Field: methods[1], Reason: "cannot be combined with " + methods[0] + ": set one authentication method"}
	}
	switch {
	case c.User != "" && c.Password == "":
		return &ConfigError{Field: "Password", Reason: "is required with User"}
	case c.User == "" && c.Password != "":
		return &ConfigError{Field: "User", Reason: "is required with Password"}
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return &ConfigError{Field: "TLS.CertFile", Reason: "and TLS.KeyFile must be set together"}
	case c.Timeout < 0:
		return &ConfigError{Field: "Timeout", Reason: fmt.Sprintf("must not be negative, got %v", c.Timeout)}
	}
	files := []struct{ field, path string }{
		{"CredsFile", c.CredsFile},
		{"NKeySeedFile", c.NKeySeedFile},
		{"TLS.CAFile", c.TLS.CAFile},
		{"TLS.CertFile", c.TLS.CertFile},
		{"TLS.KeyFile", c.TLS.KeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return &ConfigError{Field: f.field, Reason: "cannot be read", Err: err}
		}
	}
	for i, o := range c.Options {
		if o == nil {
			return &ConfigError{Field: "Options", Reason: fmt.Sprintf("entry %d is nil", i)}
		}
	}
	return nil
}

// parseServerURL parses one entry of a URL list as nats.go does: a bare
// host:port is a nats:// URL.
func parseServerURL(s string) (*url.URL, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("empty entry")
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("no host in %q", redactURL(s))
	}
	return u, nil
}

// redactURL returns the URL list without user info, for audit events and
// errors.
func redactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil && u.User != nil {
			u.User = nil
			p = u.String()
		} else if err != nil && strings.Contains(p, "@") {
			p = "<invalid url>"
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// options returns the nats.go options for c, checking that each applies
// (files parse, seeds decode), so that bad config fails before dialing.
func (c ConnectConfig) options() ([]nats.Option, error) {
	type fieldOpt struct {
		field string
		opt   nats.Option
	}
	var fos []fieldOpt
	if c.Name != "" {
		fos = append(fos, fieldOpt{"Name", nats.Name(c.Name)})
	}
	switch {
	case c.CredsFile != "":
		// UserCredentials reads the file only when connecting: decode
		// its seed now, so that a bad file is a config error and not a
		// retried connection failure.
		if _, err := nats.NkeyOptionFromSeed(c.CredsFile); err != nil {
			return nil, &ConfigError{Field: "CredsFile", Reason: "holds no user nkey seed", Err: err}
		}
		fos = append(fos, fieldOpt{"CredsFile", nats.UserCredentials(c.CredsFile)})
	case c.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.NKeySeedFile)
		if err != nil {
			return nil, &ConfigError{Field: "NKeySeedFile", Reason: "holds no user nkey seed", Err: err}
		}
		fos = append(fos, fieldOpt{"NKeySeedFile", o})
	case c.User != "":
		fos = append(fos, fieldOpt{"User", nats.UserInfo(c.User, c.Password)})
	case c.Token != "":
		fos = append(fos, fieldOpt{"Token", nats.Token(c.Token)})
	}
	if c.TLS.CAFile != "" {
		fos = append(fos, fieldOpt{"TLS.CAFile", nats.RootCAs(c.TLS.CAFile)})
	}
	if c.TLS.CertFile != "" {
		fos = append(fos, fieldOpt{"TLS.CertFile", nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile)})
	}
	if c.TLS.enabled() {
		fos = append(fos, fieldOpt{"TLS", nats.Secure()})
	}
	for _, o := range c.Options {
		fos = append(fos, fieldOpt{"Options", o})
	}
	// Apply everything once to scratch options, as nats.Connect will, so
	// that unreadable files and failing extra options show here.
	scratch := nats.GetDefaultOptions()
	opts := make([]nats.Option, 0, len(fos))
	for _, fo := range fos {
		if err := fo.opt(&scratch); err != nil {
			return nil, &ConfigError{Field: fo.field, Reason: "cannot be applied", Err: err}
		}
		opts = append(opts, fo.opt)
	}
	return opts, nil
}

// Connect connects to NATS as cfg says, retrying under the NATS_CONNECT
// category of mgr (seed 002: 5 attempts, 1 s base, 30 s max). Each failed
// attempt that will be retried emits a retry_attempt audit event, and a
// failed call emits retry_exhausted, both with opts' tenant, correlation
// and trace ids. The operation is "connect to <url>" with any credentials
// removed.
//
// Each attempt is bounded by cfg.Timeout (DefaultConnectTimeout when zero)
// and by the attempt's context deadline, whichever is earlier; the dial
// also stops when the attempt's context ends. Errors are classified with
// Classify: a server that is down (nats.ErrNoServers), a refused or timed
// out dial and the like are retried; an authorization failure
// (nats.ErrAuthorization) or a certificate error is permanent and never
// retried.
//
// Bad config, such as two authentication methods, a missing credentials
// or CA file, or an unparsable URL, returns a *ConfigError (matching
// ErrInvalidConfig) without dialing. A failed call returns a *retry.Error
// whose Cause is an *Error. mgr must come from retry.NewManager.
//
// The returned connection reconnects on its own after later failures
// (nats.go's defaults, or cfg.Options); the caller closes it.
func Connect(ctx context.Context, mgr *retry.Manager, cfg ConnectConfig, opts ...retry.Option) (*nats.Conn, error) {
	cfg = cfg.withDefaults(os.Getenv)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	natsOpts, err := cfg.options()
	if err != nil {
		return nil, err
	}
	target := redactURL(cfg.URL)
	return retry.Do(ctx, mgr, categories.NATSConnect, "connect to "+target, func(actx context.Context) (*nats.Conn, error) {
		timeout := cfg.Timeout
		if dl, ok := actx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		if timeout <= 0 {
			return nil, fail("connect", target, context.DeadlineExceeded)
		}
		d := &dialer{ctx: actx, timeout: timeout}
		all := make([]nats.Option, 0, len(natsOpts)+2)
		all = append(all, nats.Timeout(timeout), nats.SetCustomDialer(d))
		all = append(all, natsOpts...)
		nc, err := nats.Connect(cfg.URL, all...)
		d.release()
		if err != nil {
			return nil, fail("connect", target, err)
		}
		return nc, nil
	}, opts...)
}

// dialer dials with the connection attempt's context, so that a canceled
// attempt stops dialing at once. After the attempt it dials without one:
// nats.go uses the same dialer for later reconnects, which must not die
// with the attempt's context.
type dialer struct {
	mu      sync.Mutex
	ctx     context.Context // nil after release
	timeout time.Duration
}

// Dial implements nats.CustomDialer.
func (d *dialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	ctx := d.ctx
	d.mu.Unlock()
	if ctx == nil {
		ctx = context.Background()
	}
	nd := net.Dialer{Timeout: d.timeout}
	return nd.DialContext(ctx, network, address)
}

// release detaches the dialer from the attempt's context.
func (d *dialer) release() {
	d.mu.Lock()
	d.ctx = nil
	d.mu.Unlock()
}
