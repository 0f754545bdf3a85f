package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// syncBuffer is a bytes.Buffer safe for a command writing in one goroutine
// while the test reads in another.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// background runs a command until ctx ends; done yields its exit code.
func background(ctx context.Context, args ...string) (stdout, stderr *syncBuffer, done <-chan int) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ch := make(chan int, 1)
	go func() { ch <- Main(ctx, args, stdout, stderr) }()
	return stdout, stderr, ch
}

// waitExit waits, boundedly, for a background command's exit code.
func waitExit(t *testing.T, done <-chan int) int {
	t.Helper()
	select {
	case code := <-done:
		return code
	case <-time.After(15 * time.Second):
		t.Fatal("the command did not return")
		return -1
	}
}

// requireOneLine checks that a failure message is one line without a Go
// stack trace.
func requireOneLine(t *testing.T, msg string) {
	t.Helper()
	require.Equal(t, 1, strings.Count(msg, "\n"), "a one-line message: %q", msg)
	require.True(t, strings.HasSuffix(msg, "\n"), "a one-line message: %q", msg)
	require.NotContains(t, msg, "goroutine")
	require.NotContains(t, msg, "panic")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/cli -update")
	require.Equal(t, string(want), got)
}

func TestHelpGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"root", []string{"help"}},
		{"demo", []string{"demo", "--help"}},
		{"server", []string{"server", "--help"}},
		{"policies", []string{"policies", "--help"}},
		{"audit", []string{"audit", "--help"}},
		{"audit_tail", []string{"audit", "tail", "--help"}},
		{"audit_query", []string{"audit", "query", "--help"}},
		{"audit_stats", []string{"audit", "stats", "--help"}},
		{"idempotency", []string{"idempotency", "--help"}},
		{"idempotency_key", []string{"idempotency", "key", "--help"}},
		{"idempotency_get", []string{"idempotency", "get", "--help"}},
		{"idempotency_clear", []string{"idempotency", "clear", "--help"}},
		{"jobs", []string{"jobs", "--help"}},
		{"jobs_list", []string{"jobs", "list", "--help"}},
		{"jobs_inspect", []string{"jobs", "inspect", "--help"}},
		{"jobs_requeue", []string{"jobs", "requeue", "--help"}},
		{"jobs_reprocess", []string{"jobs", "reprocess", "--help"}},
		{"jobs_cancel", []string{"jobs", "cancel", "--help"}},
		{"jobs_kick", []string{"jobs", "kick", "--help"}},
		{"jobs_sweep", []string{"jobs", "sweep", "--help"}},
		{"jobs_dead", []string{"jobs", "dead", "--help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			require.Equal(t, ExitOK, code)
			require.Empty(t, errOut)
			golden(t, "help_"+tt.name+".txt", out)

			// "jetretry help CMD..." and -h are the same help.
			if tt.name != "root" {
				code, alias, _ := run(t, append([]string{"help"}, tt.args[:len(tt.args)-1]...)...)
				require.Equal(t, ExitOK, code)
				require.Equal(t, out, alias)
				code, alias, _ = run(t, append(tt.args[:len(tt.args)-1:len(tt.args)-1], "-h")...)
				require.Equal(t, ExitOK, code)
				require.Equal(t, out, alias)
			}
		})
	}
}

func TestRootHelpListsEveryCommand(t *testing.T) {
	_, out, _ := run(t, "help")
	for _, c := range commands() {
		if c.subs == nil {
			require.Contains(t, out, "\n  "+c.name+" ")
		}
		for _, sub := range c.subs {
			require.Contains(t, out, "\n  "+c.name+" "+sub.name+" ")
		}
	}
	code, _, errOut := run(t)
	require.Equal(t, ExitUsage, code)
	require.Equal(t, out, errOut, "no arguments print the help as a usage error")
}

func TestGroupWithoutSubcommand(t *testing.T) {
	for _, group := range []string{"audit", "idempotency", "jobs"} {
		t.Run(group, func(t *testing.T) {
			code, out, errOut := run(t, group)
			require.Equal(t, ExitUsage, code)
			require.Empty(t, out)
			require.Contains(t, errOut, "Usage: jetretry "+group+" <subcommand>")
			require.True(t, strings.HasSuffix(errOut, "\njetretry "+group+": missing subcommand\n"), errOut)
		})
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	// Flags may follow the arguments; "--" ends the flags.
	_, out1, _ := run(t, "idempotency", "key", "--operation", "op", "--json")
	_, out2, _ := run(t, "idempotency", "key", "--json", "--operation", "op")
	require.Equal(t, out1, out2)
	code, _, errOut := run(t, "idempotency", "key", "--operation", "op", "--", "--json")
	require.Equal(t, ExitUsage, code)
	require.Contains(t, errOut, `unexpected argument "--json"`)
}

func TestPoliciesJSON(t *testing.T) {
	code, out, _ := run(t, "policies", "--json")
	require.Equal(t, ExitOK, code)
	golden(t, "policies.json", out)
	var rows []policyRow
	require.NoError(t, json.Unmarshal([]byte(out), &rows))
	require.Len(t, rows, 17)
	defaults := categories.Defaults()
	for i, c := range categories.All() {
		p := defaults[c]
		require.Equal(t, string(c), rows[i].Category)
		require.Equal(t, p.MaxAttempts, rows[i].MaxAttempts)
		require.Equal(t, p.BaseDelay.Seconds(), rows[i].BaseDelaySeconds)
		require.Equal(t, p.MaxDelay.Seconds(), rows[i].MaxDelaySeconds)
	}
}

func TestIdempotencyKeyMatchesLibrary(t *testing.T) {
	code, out, _ := run(t, "idempotency", "key", "--operation", "kill_switch_update", "--tenant", "tenant-123",
		"--correlation", "corr-456", "--param", "switch_name=all_execution", "--param-json", "n=42")
	require.Equal(t, ExitOK, code)
	want, err := idempotency.Key("kill_switch_update", "tenant-123", "corr-456", map[string]any{"switch_name": "all_execution", "n": 42})
	require.NoError(t, err)
	require.Equal(t, want+"\n", out)

	code, out, _ = run(t, "idempotency", "key", "--operation", "op<&>", "--json")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `"canonical":{"additional_params":{},"correlation_id":"","operation":"op<&>","tenant_id":""}`)
}

func TestExitCodes(t *testing.T) {
	unreachable := []string{"--server", "nats://127.0.0.1:1", "--timeout", "300ms"}
	key := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown command", []string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"bad flag", []string{"policies", "--nope"}, ExitUsage, "flag provided but not defined: -nope"},
		{"extra arg", []string{"policies", "x"}, ExitUsage, `unexpected argument "x"`},
		{"missing operation", []string{"idempotency", "key"}, ExitUsage, "--operation is required"},
		{"bad param", []string{"idempotency", "key", "--operation", "o", "--param", "novalue"}, ExitUsage, "want k=v"},
		{"bad json param", []string{"idempotency", "key", "--operation", "o", "--param-json", "n={"}, ExitUsage, "--param-json"},
		{"unknown subcommand", []string{"idempotency", "nope"}, ExitUsage, `jetretry idempotency: unknown subcommand "nope"`},
		{"unknown audit subcommand", []string{"audit", "nope"}, ExitUsage, `jetretry audit: unknown subcommand "nope"`},

		{"server bad port", []string{"server", "--port", "70000"}, ExitUsage, "--port 70000 is not a port"},
		{"server user without password", []string{"server", "--user", "u"}, ExitUsage, "--user and --password go together"},
		{"server extra arg", []string{"server", "now"}, ExitUsage, `unexpected argument "now"`},

		{"unknown category", []string{"audit", "query", "--category", "KV_GTE"}, ExitUsage, `--category "KV_GTE": not a category`},
		{"bad since", []string{"audit", "query", "--since", "yesterday"}, ExitUsage, `--since "yesterday": want an RFC 3339 time`},
		{"negative since", []string{"audit", "stats", "--since", "-5m"}, ExitUsage, `--since "-5m"`},
		{"since after until", []string{"audit", "query", "--since", "2026-01-03", "--until", "2026-01-02"}, ExitUsage, "is not before --until"},
		{"negative limit", []string{"audit", "query", "--limit", "-1"}, ExitUsage, "--limit must not be negative"},
		{"bad stream", []string{"audit", "tail", "--stream", "a.b"}, ExitUsage, "--stream/--prefix"},
		{"bad prefix", []string{"audit", "stats", "--prefix", "a.>"}, ExitUsage, "--stream/--prefix"},
		{"user without password", []string{"audit", "query", "--user", "u"}, ExitUsage, "--password is required with --user"},
		{"two auth methods", []string{"audit", "query", "--token", "t", "--user", "u", "--password", "p"}, ExitUsage, "--token cannot be combined with --user"},
		{"tlscert without tlskey", []string{"audit", "tail", "--tlscert", "c.pem"}, ExitUsage, "--tlscert and --tlskey go together"},
		{"missing creds file", []string{"audit", "query", "--creds", "/nonexistent/x.creds"}, ExitUsage, "--creds cannot be read"},
		{"bad server URL", []string{"audit", "query", "--server", "http://x"}, ExitUsage, "--server is not a server URL list"},
		{"zero timeout", []string{"audit", "query", "--timeout", "0s"}, ExitUsage, "--timeout must be positive"},
		{"get missing key", []string{"idempotency", "get"}, ExitUsage, "missing KEY"},
		{"get bad key", []string{"idempotency", "get", "a*b"}, ExitUsage, `"a*b" is not a valid idempotency key`},
		{"get two keys", []string{"idempotency", "get", key, key}, ExitUsage, "unexpected argument"},
		{"clear bad category", []string{"idempotency", "clear", key, "--category", "NOPE"}, ExitUsage, `--category "NOPE"`},
		{"clear bad stream", []string{"idempotency", "clear", key, "--stream", "a b"}, ExitUsage, "--stream/--prefix"},

		{"jobs list extra arg", []string{"jobs", "list", "x"}, ExitUsage, `unexpected argument "x"`},
		{"jobs list bad status", []string{"jobs", "list", "--status", "done"}, ExitUsage, `--status "done": want pending, running, success or failed`},
		{"jobs list bad terminal", []string{"jobs", "list", "--terminal=maybe"}, ExitUsage, "invalid boolean value"},
		{"jobs list negative limit", []string{"jobs", "list", "--limit", "-1"}, ExitUsage, "--limit must not be negative"},
		{"jobs list bad queue", []string{"jobs", "list", "--queue", "a.b"}, ExitUsage, `--queue "a.b"`},
		{"jobs list bad bucket", []string{"jobs", "list", "--bucket", "A.B"}, ExitUsage, `--bucket "A.B"`},
		{"jobs inspect missing key", []string{"jobs", "inspect"}, ExitUsage, "missing KEY"},
		{"jobs inspect two keys", []string{"jobs", "inspect", "a", "b"}, ExitUsage, `unexpected argument "b"`},
		{"jobs requeue nothing", []string{"jobs", "requeue"}, ExitUsage, "missing KEY... or --queue Q"},
		{"jobs requeue keys and queue", []string{"jobs", "requeue", "k", "--queue", "q"}, ExitUsage, "give job KEYs, or --queue to select failed jobs, not both"},
		{"jobs requeue status without queue", []string{"jobs", "requeue", "--status", "failed"}, ExitUsage, "missing KEY... or --queue Q"},
		{"jobs requeue other status", []string{"jobs", "requeue", "--queue", "q", "--status", "success"}, ExitUsage, `--status "success": only failed jobs can be requeued`},
		{"jobs requeue bad audit stream", []string{"jobs", "requeue", "k", "--audit-stream", "a.b"}, ExitUsage, "--audit-stream/--audit-prefix"},
		{"jobs requeue over 100 keys", append(append([]string{"jobs", "requeue"}, unreachable...), manyKeys(101)...), ExitUsage,
			"101 jobs selected, more than 100: add --yes"},
		{"jobs reprocess missing key", []string{"jobs", "reprocess"}, ExitUsage, "missing KEY"},
		{"jobs cancel two keys", []string{"jobs", "cancel", "a", "b"}, ExitUsage, `unexpected argument "b"`},
		{"jobs kick missing key", []string{"jobs", "kick"}, ExitUsage, "jetretry jobs kick: missing KEY..."},
		{"jobs kick empty key", []string{"jobs", "kick", "k", ""}, ExitUsage, "empty KEY"},
		{"jobs kick reason", []string{"jobs", "kick", "k", "--reason", "r"}, ExitUsage, "flag provided but not defined: -reason"},
		{"jobs kick bad bucket", []string{"jobs", "kick", "k", "--bucket", "A.B"}, ExitUsage, `--bucket "A.B"`},
		{"jobs sweep negative grace", []string{"jobs", "sweep", "--grace", "-1s"}, ExitUsage, "--grace must be positive"},
		{"jobs sweep zero grace", []string{"jobs", "sweep", "--grace", "0s"}, ExitUsage, "--grace must be positive"},
		{"jobs sweep bad grace", []string{"jobs", "sweep", "--grace", "5"}, ExitUsage, `invalid value "5" for flag -grace`},
		{"jobs sweep bad queue", []string{"jobs", "sweep", "--queue", "bad queue"}, ExitUsage, `--queue "bad queue"`},
		{"jobs sweep negative limit", []string{"jobs", "sweep", "--limit", "-1"}, ExitUsage, "--limit must not be negative"},
		{"jobs sweep key", []string{"jobs", "sweep", "k"}, ExitUsage, `unexpected argument "k"`},
		{"jobs dead bad queue", []string{"jobs", "dead", "--queue", "a b"}, ExitUsage, `--queue "a b"`},
		{"jobs dead bad flag", []string{"jobs", "dead", "--status", "failed"}, ExitUsage, "flag provided but not defined: -status"},
		{"unknown jobs subcommand", []string{"jobs", "retry"}, ExitUsage, `jetretry jobs: unknown subcommand "retry"`},

		{"unreachable query", append([]string{"audit", "query"}, unreachable...), ExitFailure, "jetretry audit query: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable stats", append([]string{"audit", "stats"}, unreachable...), ExitFailure, "jetretry audit stats: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable tail", append([]string{"audit", "tail"}, unreachable...), ExitFailure, "jetretry audit tail: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable get", append([]string{"idempotency", "get", key}, unreachable...), ExitFailure, "jetretry idempotency get: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable clear", append([]string{"idempotency", "clear", key}, unreachable...), ExitFailure, "jetretry idempotency clear: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs list", append([]string{"jobs", "list"}, unreachable...), ExitFailure, "jetretry jobs list: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs inspect", append([]string{"jobs", "inspect", "k"}, unreachable...), ExitFailure, "jetretry jobs inspect: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs requeue", append([]string{"jobs", "requeue", "k"}, unreachable...), ExitFailure, "jetretry jobs requeue: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs requeue range", append([]string{"jobs", "requeue", "--queue", "q"}, unreachable...), ExitFailure, "jetretry jobs requeue: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs reprocess", append([]string{"jobs", "reprocess", "k"}, unreachable...), ExitFailure, "jetretry jobs reprocess: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs cancel", append([]string{"jobs", "cancel", "k"}, unreachable...), ExitFailure, "jetretry jobs cancel: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs kick", append([]string{"jobs", "kick", "k"}, unreachable...), ExitFailure, "jetretry jobs kick: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs sweep", append([]string{"jobs", "sweep"}, unreachable...), ExitFailure, "jetretry jobs sweep: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable jobs dead", append([]string{"jobs", "dead"}, unreachable...), ExitFailure, "jetretry jobs dead: cannot reach NATS at nats://127.0.0.1:1: "},
		{"unreachable redacts password", []string{"audit", "query", "--server", "nats://u:secret@127.0.0.1:1", "--timeout", "300ms"}, ExitFailure, "cannot reach NATS at nats://u:xxxxx@127.0.0.1:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := run(t, tt.args...)
			require.Equal(t, tt.code, code, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, tt.msg)
			require.NotContains(t, errOut, "secret")
			requireOneLine(t, errOut)
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
}

// manyKeys returns n job keys.
func manyKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k/%d", i)
	}
	return keys
}

func TestUnreachableFromEnv(t *testing.T) {
	t.Setenv("NATS_URL", "nats://127.0.0.1:1")
	code, _, errOut := run(t, "audit", "stats", "--timeout", "300ms")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "cannot reach NATS at nats://127.0.0.1:1:")
	requireOneLine(t, errOut)
}
