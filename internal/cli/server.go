package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

const serverUsage = `Usage: jetretry server [--port N] [--host H] [--store DIR] [--user U --password P]

Runs an embedded NATS server with JetStream in the foreground, for local
development: services, "jetretry demo --server" and the audit and
idempotency commands can all use it. Without --store, its data lives in a
fresh temporary directory that is removed when the server stops; with
--store DIR it survives restarts. Ctrl-C stops the server cleanly.

Examples:
  jetretry server
  jetretry server --port 4333 --store ./nats-data
  jetretry server --user dev --password secret

  # in another terminal
  export NATS_URL=nats://127.0.0.1:4222
  jetretry demo --server $NATS_URL
  jetretry audit tail
`

// serverStartTimeout bounds how long the server may take to accept
// clients.
const serverStartTimeout = 30 * time.Second

// serverCmd runs an embedded JetStream server until its context ends.
type serverCmd struct {
	host     string
	port     int    // -1 picks a free port
	store    string // "" means a temporary directory, removed at the end
	user     string
	password string
	verbose  bool // print the server's notices and warnings too
}

func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c serverCmd
	fs := newFlags("server", serverUsage, stdout)
	fs.StringVar(&c.host, "host", "127.0.0.1", "interface to listen on (0.0.0.0 for every interface)")
	fs.IntVar(&c.port, "port", 4222, "client port (-1 picks a free one)")
	fs.StringVar(&c.store, "store", "", "JetStream store `dir`, kept across runs (default a temporary dir, removed on exit)")
	fs.StringVar(&c.user, "user", "", "require this user name (with --password)")
	fs.StringVar(&c.password, "password", "", "require this password (with --user)")
	fs.BoolVar(&c.verbose, "log", false, "print the server's log (errors are always printed)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	switch {
	case c.host == "":
		return usagef("--host must not be empty")
	case c.port < -1 || c.port > 65535:
		return usagef("--port %d is not a port (0-65535, or -1 for a free one)", c.port)
	case (c.user == "") != (c.password == ""):
		return usagef("--user and --password go together")
	}
	return c.Run(ctx, stdout, stderr)
}

// Run starts the server, prints how to reach it, and serves until ctx ends;
// then it shuts the server down, waits for it, and returns nil. It returns
// an error when the server cannot start (the port is taken, the store is
// unusable).
func (c serverCmd) Run(ctx context.Context, stdout, stderr io.Writer) (err error) {
	store, temp := c.store, c.store == ""
	if temp {
		if store, err = os.MkdirTemp("", "jetretry-server-"); err != nil {
			return fmt.Errorf("cannot create a store directory: %w", err)
		}
		defer os.RemoveAll(store)
	} else if err := os.MkdirAll(store, 0o755); err != nil {
		return fmt.Errorf("cannot create the store directory: %w", err)
	}

	ns, err := server.NewServer(&server.Options{
		ServerName: "jetretry",
		Host:       c.host,
		Port:       c.port,
		NoSigs:     true, // the CLI's context handles signals
		JetStream:  true,
		StoreDir:   store,
		Username:   c.user,
		Password:   c.password,
	})
	if err != nil {
		return fmt.Errorf("cannot start the server: %w", err)
	}
	log := &serverLog{w: &lockedWriter{w: stderr}, verbose: c.verbose, fatal: make(chan string, 1)}
	// Our logger, never the default one: the server's Fatalf must not exit
	// the process.
	ns.SetLogger(log, false, false)
	go ns.Start()
	stop := func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	}

	deadline := time.Now().Add(serverStartTimeout)
	for !ns.ReadyForConnections(50 * time.Millisecond) {
		select {
		case msg := <-log.fatal:
			stop()
			return fmt.Errorf("cannot start the server: %s", msg)
		case <-ctx.Done():
			stop()
			return nil
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("the server was not ready after %v", serverStartTimeout)
		}
	}

	clientURL := c.clientURL(ns.Addr())
	fmt.Fprintf(stdout, "jetretry server: NATS with JetStream ready at %s\n", redacted(clientURL))
	if temp {
		fmt.Fprintf(stdout, "  store: %s (temporary: removed on exit; --store DIR keeps it)\n", store)
	} else {
		fmt.Fprintf(stdout, "  store: %s\n", store)
	}
	fmt.Fprintf(stdout, "\nUse it from another terminal:\n  export NATS_URL=%s\n  jetretry demo --server $NATS_URL\n  jetretry audit tail\n\nPress Ctrl-C to stop.\n", clientURL)

	select {
	case <-ctx.Done():
	case msg := <-log.fatal:
		stop()
		return fmt.Errorf("server failed: %s", msg)
	}
	fmt.Fprintln(stdout, "jetretry server: shutting down")
	stop()
	fmt.Fprintln(stdout, "jetretry server: stopped")
	return nil
}

// clientURL is the URL clients use to reach a server listening on addr,
// with the user and password when set. A server on every interface is
// reached on the loopback one.
func (c serverCmd) clientURL(addr net.Addr) string {
	host, port := c.host, strconv.Itoa(c.port)
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	u := url.URL{Scheme: "nats", Host: net.JoinHostPort(host, port)}
	if c.user != "" {
		u.User = url.UserPassword(c.user, c.password)
	}
	return u.String()
}

// redacted returns u with its password, if any, replaced by "xxxxx".
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Redacted()
}

// serverLog is the embedded server's logger: it prints errors (and, when
// verbose, notices and warnings) to w, and reports the first fatal error
// on fatal.
type serverLog struct {
	w       io.Writer
	verbose bool
	fatal   chan string
}

var _ server.Logger = (*serverLog)(nil)

func (l *serverLog) print(level, format string, v []any) {
	fmt.Fprintf(l.w, "jetretry server: %s: %s\n", level, fmt.Sprintf(format, v...))
}

func (l *serverLog) Noticef(format string, v ...any) {
	if l.verbose {
		l.print("notice", format, v)
	}
}

func (l *serverLog) Warnf(format string, v ...any) {
	if l.verbose {
		l.print("warning", format, v)
	}
}

func (l *serverLog) Errorf(format string, v ...any) { l.print("error", format, v) }

func (l *serverLog) Fatalf(format string, v ...any) {
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}

func (l *serverLog) Debugf(string, ...any) {}
func (l *serverLog) Tracef(string, ...any) {}

// lockedWriter serializes writes to w, which the server's goroutines share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
