package natstest

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartExample starts an embedded JetStream server on a random loopback
// port with a temp store, for runnable examples, which have no testing.TB.
// stop shuts it down and removes the store.
func StartExample() (url string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "jetretry-example-")
	if err != nil {
		return "", nil, err
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir,
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("natstest: example server not ready")
	}
	return s.ClientURL(), func() {
		s.Shutdown()
		s.WaitForShutdown()
		_ = os.RemoveAll(dir)
	}, nil
}
