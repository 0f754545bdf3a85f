package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{"policies", []string{"policies", "--help"}},
		{"idempotency", []string{"idempotency", "--help"}},
		{"idempotency_key", []string{"idempotency", "key", "--help"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(t, tt.args...)
			require.Equal(t, ExitOK, code)
			require.Empty(t, errOut)
			golden(t, "help_"+tt.name+".txt", out)
		})
	}
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
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no args", nil, ExitUsage, "Usage:"},
		{"unknown command", []string{"frobnicate"}, ExitUsage, `unknown command "frobnicate"`},
		{"bad flag", []string{"policies", "--nope"}, ExitUsage, "flag provided but not defined: -nope"},
		{"extra arg", []string{"policies", "x"}, ExitUsage, `unexpected argument "x"`},
		{"missing operation", []string{"idempotency", "key"}, ExitUsage, "--operation is required"},
		{"bad param", []string{"idempotency", "key", "--operation", "o", "--param", "novalue"}, ExitUsage, "want k=v"},
		{"bad json param", []string{"idempotency", "key", "--operation", "o", "--param-json", "n={"}, ExitUsage, "--param-json"},
		{"unknown subcommand", []string{"idempotency", "nope"}, ExitUsage, `unknown subcommand "nope"`},
		{"bad duration", []string{"demo", "--duration", "0s"}, ExitUsage, "--duration must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			require.Equal(t, tt.code, code)
			require.Contains(t, errOut, tt.msg)
			if tt.args != nil {
				require.Equal(t, 1, strings.Count(errOut, "\n"), "a one-line message: %q", errOut)
			}
		})
	}
}

func TestDemoShortRun(t *testing.T) {
	code, out, errOut := run(t, "demo", "--duration", "300ms", "--rate", "200", "--seed", "3")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "done: 60 operations")
	for _, c := range categories.All() {
		require.Contains(t, out, string(c))
	}
}

func TestPlanWorkloadIsReproducible(t *testing.T) {
	require.Equal(t, planWorkload(200, 9), planWorkload(200, 9))
	require.NotEqual(t, planWorkload(200, 9), planWorkload(200, 10))
	kinds := map[string]bool{}
	for _, op := range planWorkload(500, 1) {
		kinds[op.kind] = true
	}
	require.Len(t, kinds, 6, "every kind of outcome is planned")
}
