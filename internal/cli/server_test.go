package cli

import (
	"context"
	"net"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

var (
	readyURL  = regexp.MustCompile(`ready at (nats://\S+)`)
	exportURL = regexp.MustCompile(`export NATS_URL=(\S+)`)
	storeLine = regexp.MustCompile(`store: (\S+)`)
)

// startServerCmd runs "jetretry server" with args in the background until
// the returned cancel, and returns its client URL (credentials included)
// and store dir once it is ready.
func startServerCmd(t *testing.T, args ...string) (url, store string, stdout *syncBuffer, cancel context.CancelFunc, done <-chan int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stdout, stderr, done := background(ctx, append([]string{"server", "--port", "-1"}, args...)...)
	require.Eventually(t, func() bool { return exportURL.MatchString(stdout.String()) }, 15*time.Second, 10*time.Millisecond,
		"stdout: %s\nstderr: %s", stdout, stderr)
	out := stdout.String()
	return exportURL.FindStringSubmatch(out)[1], storeLine.FindStringSubmatch(out)[1], stdout, cancel, done
}

func TestServerServesJetStreamAndStops(t *testing.T) {
	url, store, stdout, cancel, done := startServerCmd(t)
	out := stdout.String()
	require.Equal(t, url, readyURL.FindStringSubmatch(out)[1])
	require.Contains(t, out, "jetretry audit tail")
	require.Contains(t, out, "temporary: removed on exit")

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "t.1", []byte("x"))
	require.NoError(t, err)

	// The CLI works against it.
	code, _, errOut := run(t, "audit", "query", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "audit stream JETRETRY_AUDIT not found at "+url)

	cancel()
	require.Equal(t, ExitOK, waitExit(t, done))
	require.Contains(t, stdout.String(), "jetretry server: stopped")
	_, err = nats.Connect(url, nats.Timeout(time.Second))
	require.Error(t, err, "the server is down")
	_, err = os.Stat(store)
	require.True(t, os.IsNotExist(err), "the temporary store is removed: %v", err)
}

func TestServerUserPasswordAndStore(t *testing.T) {
	dir := t.TempDir()
	url, store, stdout, cancel, done := startServerCmd(t, "--user", "dev", "--password", "s3cret", "--store", dir)
	require.Equal(t, dir, store)
	require.Contains(t, url, "dev:s3cret@")
	require.NotContains(t, readyURL.FindStringSubmatch(stdout.String())[1], "s3cret", "the banner redacts the password")

	_, err := nats.Connect(readyURL.FindStringSubmatch(stdout.String())[1], nats.Timeout(time.Second))
	require.Error(t, err, "no credentials, no entry")
	nc, err := nats.Connect(url)
	require.NoError(t, err, "the printed NATS_URL carries the credentials")
	nc.Close()

	cancel()
	require.Equal(t, ExitOK, waitExit(t, done))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.NotEmpty(t, entries, "--store keeps the data")
}

func TestServerPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)

	start := time.Now()
	code, out, errOut := run(t, "server", "--port", port)
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "jetretry server: cannot start the server: ")
	require.Contains(t, errOut, port)
	requireOneLine(t, errOut)
	require.Less(t, time.Since(start), 10*time.Second)
}

func TestServerClientURL(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4zero, Port: 4333}
	tests := []struct {
		name string
		cmd  serverCmd
		want string
	}{
		{"loopback", serverCmd{host: "127.0.0.1"}, "nats://127.0.0.1:4333"},
		{"every interface", serverCmd{host: "0.0.0.0"}, "nats://127.0.0.1:4333"},
		{"ipv6", serverCmd{host: "::1"}, "nats://[::1]:4333"},
		{"name", serverCmd{host: "localhost"}, "nats://localhost:4333"},
		{"credentials", serverCmd{host: "127.0.0.1", user: "a b", password: "p@ss"}, "nats://a%20b:p%40ss@127.0.0.1:4333"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.cmd.clientURL(addr))
		})
	}
}
