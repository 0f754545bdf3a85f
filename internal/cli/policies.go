package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/jetretry/jetretry/categories"
)

const policiesUsage = `Usage: jetretry policies [--json]

Prints seed 002's retry policy matrix: one row per category.

Examples:
  jetretry policies
  jetretry policies --json | jq '.[] | select(.max_attempts > 2)'
`

// policyRow is the JSON form of one category's policy.
type policyRow struct {
	Category          string  `json:"category"`
	Name              string  `json:"name"`
	MaxAttempts       int     `json:"max_attempts"`
	BaseDelaySeconds  float64 `json:"base_delay_seconds"`
	MaxDelaySeconds   float64 `json:"max_delay_seconds"`
	BackoffMultiplier float64 `json:"backoff_multiplier"`
	Jitter            string  `json:"jitter"`
	JitterFactor      float64 `json:"jitter_factor"`
}

func runPolicies(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := newFlags("policies", policiesUsage, stdout)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := fs.positional(); err != nil {
		return err
	}
	defaults := categories.Defaults()
	rows := make([]policyRow, 0, len(defaults))
	for _, c := range categories.All() {
		p := defaults[c]
		rows = append(rows, policyRow{
			Category: string(c), Name: categories.Name(c), MaxAttempts: p.MaxAttempts,
			BaseDelaySeconds: p.BaseDelay.Seconds(), MaxDelaySeconds: p.MaxDelay.Seconds(),
			BackoffMultiplier: p.Multiplier, Jitter: p.Jitter.String(), JitterFactor: p.JitterFactor,
		})
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tATTEMPTS\tBASE\tMAX\tBACKOFF\tJITTER")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1fs\t%.1fs\t%.1fx\t±%.0f%%\n", r.Category, r.MaxAttempts,
			r.BaseDelaySeconds, r.MaxDelaySeconds, r.BackoffMultiplier, r.JitterFactor*100)
	}
	return tw.Flush()
}
