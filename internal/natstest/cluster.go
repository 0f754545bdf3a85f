package natstest

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StartCluster starts a JetStream cluster of n servers on 127.0.0.1, each
// with a random client port and its own store, routed to each other, and
// waits until JetStream answers on every server. The servers are shut
// down when the test ends; each can be shut down and brought back (Up) on
// its ports and store.
func StartCluster(tb testing.TB, n int, opts ...Option) []*Server {
	tb.Helper()
	routes := make([]string, n)
	ports := make([]int, n)
	for i := range n {
		ports[i] = freePort(tb)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	servers := make([]*Server, n)
	for i := range n {
		o := &server.Options{
			ServerName: fmt.Sprintf("jetretry-test-%d", i),
			Host:       "127.0.0.1",
			Port:       -1,
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   tb.TempDir(),
			Cluster: server.ClusterOpts{
				Name: "jetretry-test", Host: "127.0.0.1", Port: ports[i],
			},
			Routes:             server.RoutesFromStr(strings.Join(routes, ",")),
			JetStreamMaxMemory: 256 << 20,
			JetStreamMaxStore:  1 << 30,
		}
		for _, opt := range opts {
			opt(o)
		}
		servers[i] = &Server{opts: o, tb: tb}
	}
	// Clustered JetStream starts once a quorum of servers is up: start
	// them together.
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(func() { s.start() })
	}
	wg.Wait()
	for _, s := range servers {
		s.opts.Port = s.Addr().(*net.TCPAddr).Port
		tb.Cleanup(s.Shutdown)
	}
	for _, s := range servers {
		waitJetStream(tb, s.URL())
	}
	return servers
}

// ClusterURL is a client URL list naming every server of a cluster.
func ClusterURL(servers []*Server) string {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.URL()
	}
	return strings.Join(urls, ",")
}

// waitJetStream waits until the JetStream API answers through url.
func waitJetStream(tb testing.TB, url string) {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: JetStream not ready at %s: %v", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
