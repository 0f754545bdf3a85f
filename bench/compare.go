package bench

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// Peer modules whose versions a Report records.
var peerModules = []string{
	"github.com/failsafe-go/failsafe-go",
	"github.com/cenkalti/backoff/v5",
	"github.com/avast/retry-go/v5",
}

// Options configure Compare.
type Options struct {
	// Runs is how many times each case runs; the report keeps the medians.
	// It must be at least 1.
	Runs int
	// BenchTime is the target duration of one run of a case, as go test's
	// -benchtime; zero means testing's default (1s).
	BenchTime time.Duration
	// Progress, when not nil, receives a line per finished run.
	Progress io.Writer
	// Groups, when not nil, keeps only the groups whose name it matches.
	Groups *regexp.Regexp
}

// Result is the outcome of one case over all its runs.
type Result struct {
	Group string `json:"group"`
	Name  string `json:"name"`
	// Medians over the runs.
	NsPerOp     float64 `json:"ns_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
	// RatioToJetretry is NsPerOp ÷ jetretry's NsPerOp in the same group:
	// above 1 means jetretry is faster. Zero when the group has no
	// jetretry case.
	RatioToJetretry float64 `json:"ratio_to_jetretry,omitempty"`
	// Samples are the ns/op of each run, in run order.
	Samples []float64 `json:"ns_per_op_samples"`
	// Iterations are the b.N of each run.
	Iterations []int `json:"iterations"`
}

// Report is the output of Compare.
type Report struct {
	Date      time.Time         `json:"date"`
	GOOS      string            `json:"goos"`
	GOARCH    string            `json:"goarch"`
	CPU       string            `json:"cpu,omitempty"`
	NumCPU    int               `json:"num_cpu"`
	GoVersion string            `json:"go_version"`
	Runs      int               `json:"runs"`
	BenchTime string            `json:"bench_time"`
	Peers     map[string]string `json:"peers"`
	Results   []Result          `json:"results"`
}

// Compare runs every case of Cases opts.Runs times with testing.Benchmark
// and returns the medians. The runs are interleaved (every case once, then
// every case again) so that a noisy moment on the machine does not hit all
// the runs of one case. It first runs each case's Verify and fails if one
// fails, or if a benchmark fails.
//
// Setting BenchTime sets the test.benchtime flag of flag.CommandLine, the
// only way to configure testing.Benchmark.
func Compare(opts Options) (*Report, error) {
	if opts.Runs < 1 {
		return nil, fmt.Errorf("bench: runs must be at least 1, got %d", opts.Runs)
	}
	if opts.BenchTime < 0 {
		return nil, fmt.Errorf("bench: benchtime must not be negative, got %v", opts.BenchTime)
	}
	benchTime := "1s"
	if opts.BenchTime > 0 {
		benchTime = opts.BenchTime.String()
		testing.Init()
		if err := flag.Set("test.benchtime", benchTime); err != nil {
			return nil, fmt.Errorf("bench: set benchtime: %w", err)
		}
	}
	var cases []Case
	for _, c := range AllCases() {
		if opts.Groups == nil || opts.Groups.MatchString(c.Group) {
			cases = append(cases, c)
		}
	}
	if len(cases) == 0 {
		return nil, fmt.Errorf("bench: no case matches the group filter")
	}
	defer Shutdown()
	for _, c := range cases {
		if c.Verify == nil {
			continue
		}
		if err := c.Verify(); err != nil {
			return nil, fmt.Errorf("bench: %s/%s: %w", c.Group, c.Name, err)
		}
	}

	rep := &Report{
		Date:      time.Now().UTC(),
		GOOS:      runtime.GOOS,
		GOARCH:    runtime.GOARCH,
		CPU:       cpuModel(),
		NumCPU:    runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Runs:      opts.Runs,
		BenchTime: benchTime,
		Peers:     peerVersions(),
	}
	runs := make([][]testing.BenchmarkResult, len(cases))
	for r := range opts.Runs {
		for i, c := range cases {
			res := testing.Benchmark(c.Bench)
			if res.N == 0 {
				return nil, fmt.Errorf("bench: %s/%s failed (run go test -bench '%s/%s' for details)", c.Group, c.Name, c.Group, c.Name)
			}
			runs[i] = append(runs[i], res)
			if opts.Progress != nil {
				fmt.Fprintf(opts.Progress, "run %d/%d  %-24s %12.1f ns/op\n", r+1, opts.Runs, c.Group+"/"+c.Name, nsPerOp(res))
			}
		}
	}

	ref := map[string]float64{} // group -> jetretry's median ns/op
	for i, c := range cases {
		res := Result{Group: c.Group, Name: c.Name}
		var allocs, bytes []int64
		for _, br := range runs[i] {
			res.Samples = append(res.Samples, nsPerOp(br))
			res.Iterations = append(res.Iterations, br.N)
			allocs = append(allocs, br.AllocsPerOp())
			bytes = append(bytes, br.AllocedBytesPerOp())
		}
		res.NsPerOp = median(res.Samples)
		res.AllocsPerOp = median(allocs)
		res.BytesPerOp = median(bytes)
		if c.Name == Jetretry {
			ref[c.Group] = res.NsPerOp
		}
		rep.Results = append(rep.Results, res)
	}
	for i := range rep.Results {
		if j := ref[rep.Results[i].Group]; j > 0 {
			rep.Results[i].RatioToJetretry = rep.Results[i].NsPerOp / j
		}
	}
	return rep, nil
}

// WriteTable writes the report as a table per group.
func (rep *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "date:    %s\n", rep.Date.Format(time.RFC3339))
	fmt.Fprintf(&b, "machine: %s/%s, %d CPUs", rep.GOOS, rep.GOARCH, rep.NumCPU)
	if rep.CPU != "" {
		fmt.Fprintf(&b, " (%s)", rep.CPU)
	}
	fmt.Fprintf(&b, ", %s\n", rep.GoVersion)
	fmt.Fprintf(&b, "runs:    %d per case, %s each; medians shown\n", rep.Runs, rep.BenchTime)
	names := make([]string, 0, len(rep.Peers))
	for m, v := range rep.Peers {
		names = append(names, m+" "+v)
	}
	slices.Sort(names)
	fmt.Fprintf(&b, "peers:   %s\n", strings.Join(names, ", "))

	for _, group := range groups(rep.Results) {
		fmt.Fprintf(&b, "\n%s\n", group)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "case        \tns/op\tmin–max\tallocs/op\tB/op\t÷ jetretry\t")
		var jet, raw *Result
		var slower []string
		fastest := true
		for i := range rep.Results {
			r := &rep.Results[i]
			if r.Group != group {
				continue
			}
			ratio := "-"
			if r.RatioToJetretry > 0 {
				ratio = fmt.Sprintf("%.2f", r.RatioToJetretry)
			}
			fmt.Fprintf(tw, "%-12s\t%s\t%s–%s\t%d\t%d\t%s\t\n", r.Name, formatNs(r.NsPerOp),
				formatNs(slices.Min(r.Samples)), formatNs(slices.Max(r.Samples)), r.AllocsPerOp, r.BytesPerOp, ratio)
			switch {
			case r.Name == Jetretry:
				jet = r
			case r.Name == Raw:
				raw = r
			case strings.HasPrefix(r.Name, Jetretry+"-"):
				// a jetretry variant, not a peer
			default:
				if r.RatioToJetretry > 0 && r.RatioToJetretry <= 1 {
					fastest = false
					slower = append(slower, r.Name)
				}
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if jet != nil && raw != nil {
			if goal, ok := Goals[group]; ok {
				got := raw.NsPerOp / jet.NsPerOp
				verdict := "met"
				if got < goal {
					verdict = "NOT met"
				}
				fmt.Fprintf(&b, "jetretry throughput ÷ raw: %.2f× (goal ≥%.1f×: %s)\n", got, goal, verdict)
			} else {
				fmt.Fprintf(&b, "jetretry vs raw: %.1f× (+%.1f ns/op)\n", jet.NsPerOp/raw.NsPerOp, jet.NsPerOp-raw.NsPerOp)
			}
		}
		for i := range rep.Results {
			r := &rep.Results[i]
			if r.Group != group || jet == nil || !strings.HasPrefix(r.Name, Jetretry+"-") {
				continue
			}
			line := fmt.Sprintf("%s throughput ÷ jetretry: %.2f×", r.Name, jet.NsPerOp/r.NsPerOp)
			if goal, ok := VariantGoals[group+"/"+r.Name]; ok {
				verdict := "met"
				if jet.NsPerOp/r.NsPerOp < goal {
					verdict = "NOT met"
				}
				line += fmt.Sprintf(" (goal ≥%.1f×: %s)", goal, verdict)
			}
			fmt.Fprintln(&b, line)
		}
		if strings.HasPrefix(group, "Jobs") && jet != nil {
			fmt.Fprintf(&b, "jetretry: %.0f jobs/s end to end", 1e9/jet.NsPerOp)
			if raw != nil {
				fmt.Fprintf(&b, "; raw work queue: %.0f msgs/s", 1e9/raw.NsPerOp)
			}
			fmt.Fprintln(&b)
		}
		if jet != nil && len(peersIn(rep.Results, group)) > 0 {
			if fastest {
				fmt.Fprintln(&b, "jetretry faster than every peer: yes")
			} else {
				fmt.Fprintf(&b, "jetretry faster than every peer: no (not faster than %s)\n", strings.Join(slower, ", "))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as indented JSON to the file at path.
func (rep *Report) WriteJSON(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encode report: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: write report: %w", err)
	}
	return nil
}

// formatNs formats a duration in ns with three or more significant digits.
func formatNs(ns float64) string {
	switch {
	case ns < 10:
		return fmt.Sprintf("%.2f", ns)
	case ns < 100:
		return fmt.Sprintf("%.1f", ns)
	}
	return fmt.Sprintf("%.0f", ns)
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

// median returns the median of xs, the mean of the middle two for an even
// count. xs must not be empty; it is not modified.
func median[T int64 | float64](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// groups returns the groups of rs in order of first appearance.
func groups(rs []Result) []string {
	var gs []string
	for _, r := range rs {
		if !slices.Contains(gs, r.Group) {
			gs = append(gs, r.Group)
		}
	}
	return gs
}

// peersIn returns the names of the peer cases of group.
func peersIn(rs []Result, group string) []string {
	var ps []string
	for _, r := range rs {
		if r.Group == group && r.Name != Jetretry && r.Name != Raw && !strings.HasPrefix(r.Name, Jetretry+"-") {
			ps = append(ps, r.Name)
		}
	}
	return ps
}

// peerVersions returns the versions of the peer modules linked into the
// running binary.
func peerVersions() map[string]string {
	out := map[string]string{}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return out
	}
	for _, d := range info.Deps {
		if slices.Contains(peerModules, d.Path) {
			out[d.Path] = d.Version
		}
	}
	return out
}

// cpuModel returns the CPU model name on Linux, or "".
func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(data)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
