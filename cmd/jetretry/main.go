// Command jetretry is the operator CLI of jetretry: run `jetretry help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetretry/jetretry/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
