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
	"sort"
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

// command is one command: a leaf with run, or a group with subcommands.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// A group has subcommands and a help text that introduces them.
	subs  []command
	intro string
}

func commands() []command {
	return []command{
		{name: "demo", summary: "run a flaky workload through every category and print audit statistics", run: runDemo},
		{name: "server", summary: "run an embedded JetStream server for local development", run: runServer},
		{name: "policies", summary: "print the retry policy matrix", run: runPolicies},
		{name: "audit", summary: "read the audit stream", intro: auditIntro, subs: []command{
			{name: "tail", summary: "follow audit events as they arrive", run: runAuditTail},
			{name: "query", summary: "print stored audit events (--since, --until)", run: runAuditQuery},
			{name: "stats", summary: "retry pattern analysis per category", run: runAuditStats},
		}},
		{name: "idempotency", summary: "derive keys, inspect and clear idempotency records", intro: idempotencyIntro, subs: []command{
			{name: "key", summary: "print the canonical idempotency key (offline)", run: runIdempotencyKey},
			{name: "get", summary: "show an idempotency record", run: runIdempotencyGet},
			{name: "clear", summary: "delete an idempotency record, audited as a manual override", run: runIdempotencyClear},
		}},
		{name: "jobs", summary: "list, inspect, requeue, reprocess, cancel, kick and sweep durable jobs", intro: jobsIntro, subs: []command{
			{name: "list", summary: "list jobs (--queue, --status, --terminal)", run: runJobsList},
			{name: "inspect", summary: "show a job with its run history", run: runJobsInspect},
			{name: "requeue", summary: "move failed jobs back to pending, audited (--yes above 100)", run: runJobsRequeue},
			{name: "reprocess", summary: "run a successful job again, audited", run: runJobsOverride("reprocess", jobsReprocessUsage)},
			{name: "cancel", summary: "end a pending or running job as failed, audited", run: runJobsOverride("cancel", jobsCancelUsage)},
			{name: "kick", summary: "dispatch pending jobs again (not audited)", run: runJobsKick},
			{name: "sweep", summary: "dispatch stranded pending jobs again (not audited)", run: runJobsSweep},
			{name: "dead", summary: "print the dead letters of failed jobs", run: runJobsDead},
		}},
	}
}

const rootHelp = `jetretry: bounded, idempotent, audited retries on NATS JetStream.

Usage:
  jetretry <command> [subcommand] [flags]

Commands:
%s
Run "jetretry <command> --help" for a command's flags and examples.

Commands that talk to NATS take --server (default $NATS_URL, then
nats://127.0.0.1:4222), --creds, --nkey, --user/--password, --token,
--tlsca/--tlscert/--tlskey and --timeout.

Exit codes: 0 ok, 1 operation failed, 2 usage error.
`

// rootUsage returns the root help, which lists every command and
// subcommand.
func rootUsage() string {
	var rows [][2]string
	for _, c := range commands() {
		if c.subs == nil {
			rows = append(rows, [2]string{c.name, c.summary})
			continue
		}
		for _, s := range c.subs {
			rows = append(rows, [2]string{c.name + " " + s.name, s.summary})
		}
	}
	return fmt.Sprintf(rootHelp, listing(rows))
}

// listing formats name/summary rows as an aligned, indented list.
func listing(rows [][2]string) string {
	width := 0
	for _, r := range rows {
		width = max(width, len(r[0]))
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, r[0], r[1])
	}
	return b.String()
}

// groupUsage returns the help of a command group.
func groupUsage(c command) string {
	rows := make([][2]string, 0, len(c.subs))
	for _, s := range c.subs {
		rows = append(rows, [2]string{s.name, s.summary})
	}
	return fmt.Sprintf("Usage: jetretry %s <subcommand> [flags]\n\n%s\nSubcommands:\n%s\nRun \"jetretry %s <subcommand> --help\" for its flags and examples.\n",
		c.name, c.intro, listing(rows), c.name)
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// Main runs the command line args and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		// An operator sees one line, never a Go stack trace; the bug is
		// still reported, with its value, and the exit code says failure.
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "jetretry: internal error: %v (please report it)\n", r)
			code = ExitFailure
		}
	}()
	if len(args) == 0 {
		fmt.Fprint(stderr, rootUsage())
		return ExitUsage
	}
	if isHelp(args[0]) {
		if len(args) > 1 && args[0] == "help" {
			// "jetretry help audit query" is "jetretry audit query --help".
			return Main(ctx, append(args[1:len(args):len(args)], "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, rootUsage())
		return ExitOK
	}
	path, cmds := "jetretry", commands()
	for {
		c, ok := find(cmds, args[0])
		if !ok {
			if path == "jetretry" {
				fmt.Fprintf(stderr, "jetretry: unknown command %q (run \"jetretry help\")\n", args[0])
			} else {
				fmt.Fprintf(stderr, "%s: unknown subcommand %q (run \"%s --help\")\n", path, args[0], path)
			}
			return ExitUsage
		}
		path += " " + c.name
		args = args[1:]
		if c.subs == nil {
			return exitCode(path, c.run(ctx, args, stdout, stderr), stderr)
		}
		switch {
		case len(args) == 0:
			fmt.Fprint(stderr, groupUsage(c))
			fmt.Fprintf(stderr, "\n%s: missing subcommand\n", path)
			return ExitUsage
		case isHelp(args[0]):
			fmt.Fprint(stdout, groupUsage(c))
			return ExitOK
		}
		cmds = c.subs
	}
}

func find(cmds []command, name string) (command, bool) {
	for _, c := range cmds {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// exitCode prints err, if any, as one line prefixed by the command path,
// and returns the exit code it stands for.
func exitCode(path string, err error, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: %s\n", path, oneLine(err.Error()))
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "%s: %s\n", path, oneLine(err.Error()))
		return ExitFailure
	}
}

// oneLine folds a multi-line message (errors.Join) onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// flagSet is a command's flags and its help text.
type flagSet struct {
	*flag.FlagSet
	usage  string
	stdout io.Writer
	conn   map[string]bool // the connection flags, listed apart in the help
	args   []string        // the positional arguments, once parsed
}

// newFlags returns a flag set whose --help prints usage (with examples) and
// the flags to stdout, and whose errors are usage errors.
func newFlags(name, usage string, stdout io.Writer) *flagSet {
	fs := flag.NewFlagSet("jetretry "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, usage: usage, stdout: stdout}
}

// parse parses args. Flags may follow positional arguments ("get KEY
// --json"); after "--" every argument is positional. --help prints the
// help and returns flag.ErrHelp; a bad flag gives a usage error.
func parse(fs *flagSet, args []string) error {
	var err error
	for {
		if err = fs.Parse(args); err != nil {
			break
		}
		rest := fs.FlagSet.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			fs.args = append(fs.args, rest...)
			break
		}
		fs.args = append(fs.args, rest[0])
		args = rest[1:]
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(fs.stdout, fs.usage)
		fmt.Fprintln(fs.stdout, "\nFlags:")
		fs.printDefaults(false)
		if len(fs.conn) > 0 {
			fmt.Fprintln(fs.stdout, "\nConnection flags:")
			fs.printDefaults(true)
		}
		return err
	}
	return usagef("%v", err)
}

// printDefaults prints the command's own flags, or its connection flags,
// in the flag package's format.
func (fs *flagSet) printDefaults(conn bool) {
	show := flag.NewFlagSet(fs.Name(), flag.ContinueOnError)
	fs.VisitAll(func(f *flag.Flag) {
		if fs.conn[f.Name] == conn {
			show.Var(f.Value, f.Name, f.Usage)
			show.Lookup(f.Name).DefValue = f.DefValue
		}
	})
	show.SetOutput(fs.stdout)
	show.PrintDefaults()
}

// Args returns the positional arguments, wherever they stood among the
// flags.
func (fs *flagSet) Args() []string { return fs.args }

// NArg returns the number of positional arguments.
func (fs *flagSet) NArg() int { return len(fs.args) }

// Arg returns the i'th positional argument, or "" when there is none.
func (fs *flagSet) Arg(i int) string {
	if i < 0 || i >= len(fs.args) {
		return ""
	}
	return fs.args[i]
}

// positional returns the positional arguments after checking their
// count: want names them, and every one is required.
func (fs *flagSet) positional(want ...string) ([]string, error) {
	got := fs.args
	switch {
	case len(got) < len(want):
		return nil, usagef("missing %s", strings.Join(want[len(got):], " "))
	case len(got) > len(want):
		return nil, usagef("unexpected argument %q", got[len(want)])
	}
	return got, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
