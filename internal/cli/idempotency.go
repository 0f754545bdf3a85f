package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/jetretry/jetretry/idempotency"
)

const idempotencyIntro = `Derives idempotency keys (offline), and shows or clears the records that
services keep per key in the JetStream KV bucket (default
JETRETRY_IDEMPOTENCY). Clearing a record lets the next call with its key
run again; it is recorded in the audit stream as a manual override.
`

const idempotencyKeyUsage = `Usage: jetretry idempotency key --operation OP [--tenant T] [--correlation C] [--param k=v ...] [--json]

Prints the canonical idempotency key, exactly as idempotency.Key derives it:
the SHA-256 of the RFC 8785 canonical JSON of
{"additional_params":{...},"correlation_id":C,"operation":OP,"tenant_id":T}.
Parameter values are strings unless given with --param-json.

Examples:
  jetretry idempotency key --operation kill_switch_update --tenant tenant-123 \
      --correlation corr-456 --param switch_name=all_execution
  jetretry idempotency key --operation charge --param-json amount_cents=4200 --json
`

// multiFlag collects repeated k=v flags.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runIdempotencyKey(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("idempotency key", idempotencyKeyUsage, stdout)
	op := fs.String("operation", "", "operation name (required)")
	tenant := fs.String("tenant", "", "tenant id")
	corr := fs.String("correlation", "", "correlation id")
	asJSON := fs.Bool("json", false, "print the canonical form and key as JSON")
	var params, jsonParams multiFlag
	fs.Var(&params, "param", "additional parameter `k=v` with a string value (repeatable)")
	fs.Var(&jsonParams, "param-json", "additional parameter `k=JSON` with a JSON value (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	if *op == "" {
		return usagef("--operation is required")
	}
	p := map[string]any{}
	for _, kv := range params {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--param %q: want k=v", kv)
		}
		p[k] = v
	}
	for _, kv := range jsonParams {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--param-json %q: want k=JSON", kv)
		}
		dec := json.NewDecoder(strings.NewReader(v))
		dec.UseNumber()
		var val any
		if err := dec.Decode(&val); err != nil {
			return usagef("--param-json %q: %v", kv, err)
		}
		p[k] = val
	}
	canon, err := idempotency.Canonical(*op, *tenant, *corr, p)
	if err != nil {
		return usagef("%v", err)
	}
	key, err := idempotency.Key(*op, *tenant, *corr, p)
	if err != nil {
		return usagef("%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false) // keep the canonical form byte for byte
		return enc.Encode(struct {
			Key       string          `json:"key"`
			Canonical json.RawMessage `json:"canonical"`
		}{key, canon})
	}
	_, err = fmt.Fprintln(stdout, key)
	return err
}
