// Package cli implements the jetretry command line. Every command is a
// value with a Run method that writes to injected writers, so commands are
// tested without a process; cmd/jetretry only wires os.Args and os.Exit.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the operation failed
	ExitUsage   = 2 // bad command line
)

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "run a flaky workload through every category and print audit statistics", runDemo},
		{"policies", "print the retry policy matrix", runPolicies},
		{"idempotency", "derive idempotency keys", runIdempotency},
	}
}

const rootHelp = `jetretry: bounded, idempotent, audited retries on NATS JetStream.

Usage:
  jetretry <command> [flags]

Commands:
%s
Run "jetretry <command> --help" for a command's flags and examples.

Exit codes: 0 ok, 1 operation failed, 2 usage error.
`

// Main runs the command line args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		var b strings.Builder
		for _, c := range commands() {
			fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
		}
		w := stdout
		code := ExitOK
		if len(args) == 0 {
			w, code = stderr, ExitUsage
		}
		fmt.Fprintf(w, rootHelp, b.String())
		return code
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var ue *usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return ExitOK
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "jetretry %s: %v\n", c.name, err)
			return ExitUsage
		default:
			fmt.Fprintf(stderr, "jetretry %s: %v\n", c.name, err)
			return ExitFailure
		}
	}
	fmt.Fprintf(stderr, "jetretry: unknown command %q (run \"jetretry help\")\n", args[0])
	return ExitUsage
}

// flagSet is a command's flags and its help text.
type flagSet struct {
	*flag.FlagSet
	usage  string
	stdout io.Writer
}

// newFlags returns a flag set whose --help prints usage (with examples) and
// the flags to stdout, and whose errors are usage errors.
func newFlags(name, usage string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet("jetretry "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, usage: usage, stdout: stdout}
}

// parse parses args. --help prints the help and returns flag.ErrHelp; a bad
// flag gives a usage error.
func parse(fs *flagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(fs.stdout, fs.usage)
		fmt.Fprintln(fs.stdout, "\nFlags:")
		fs.SetOutput(fs.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return err
	}
	return usagef("%v", err)
}
