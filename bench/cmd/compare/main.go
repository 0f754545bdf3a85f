// Command compare runs the jetretry/peer benchmarks in process, several
// times each, and prints the median ns/op, allocs/op and B/op per case with
// each case's ratio to jetretry.
//
// Usage:
//
//	go run ./cmd/compare [-runs 5] [-benchtime 1s] [-groups REGEXP] [-json results.json]
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/jetretry/jetretry/bench"
)

func main() {
	runs := flag.Int("runs", 5, "runs per case; the medians are reported")
	benchTime := flag.Duration("benchtime", 0, "target duration of one run (default 1s, as go test)")
	jsonPath := flag.String("json", "", "also write the results as JSON to this file")
	quiet := flag.Bool("q", false, "do not print progress to stderr")
	groups := flag.String("groups", "", "only the groups matching this regular expression (e.g. '^KV|Audit')")
	flag.Parse()

	opts := bench.Options{Runs: *runs, BenchTime: *benchTime, Progress: os.Stderr}
	if *groups != "" {
		re, err := regexp.Compile(*groups)
		if err != nil {
			fmt.Fprintln(os.Stderr, "compare: -groups:", err)
			os.Exit(2)
		}
		opts.Groups = re
	}
	if *quiet {
		opts.Progress = nil
	}
	rep, err := bench.Compare(opts)
	if err == nil {
		err = rep.WriteTable(os.Stdout)
	}
	if without, with := bench.JobsHeapGrowth(); err == nil && (without != 0 || with != 0) {
		fmt.Printf("\nJobs: largest growth of the Go heap in use over one run (after GC): %.1f MiB without the backlog, %.1f MiB with it\n",
			float64(without)/(1<<20), float64(with)/(1<<20))
	}
	if without, with := bench.JobsRSS(); err == nil && (without != 0 || with != 0) {
		fmt.Printf("Jobs: largest resident set size of the process (workers and embedded server) after a run: %.0f MiB without the backlog, %.0f MiB with it\n",
			float64(without)/(1<<20), float64(with)/(1<<20))
	}
	if n := bench.AuditSpooled(); err == nil && n > 0 {
		fmt.Printf("\nAuditEmit: %d events went through the disk spool (buffer full); all were published before Flush returned\n", n)
	}
	if err == nil && *jsonPath != "" {
		err = rep.WriteJSON(*jsonPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}
