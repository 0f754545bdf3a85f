package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

func TestDemoPlanIsReproducible(t *testing.T) {
	require.Equal(t, planWorkload(500, 9), planWorkload(500, 9))
	require.NotEqual(t, planWorkload(500, 9), planWorkload(500, 10))
	require.Equal(t, planWorkload(500, 9)[:123], planWorkload(123, 9), "a shorter plan is a prefix of a longer one")
	for i, op := range planWorkload(500, 9) {
		require.Equal(t, i, op.Seq)
	}
}

func TestDemoPlanCoversEveryCategoryAndKind(t *testing.T) {
	defaults := categories.Defaults()
	for seed := uint64(0); seed < 50; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			// The first round: every category once, each with an
			// outcome that leaves audit events, and every such kind.
			first := planWorkload(17, seed)
			cats := map[retry.Category]bool{}
			var used kindSet
			for _, op := range first {
				cats[op.Category] = true
				used |= kindsOf(op.Kind)
				require.NotEqual(t, kindOK, op.Kind, "op %d", op.Seq)
			}
			require.Len(t, cats, 17)
			require.Equal(t, allKinds&^kindsOf(kindOK), used)

			counts := map[retry.Category]int{}
			var all kindSet
			for _, op := range planWorkload(1000, seed) {
				counts[op.Category]++
				all |= kindsOf(op.Kind)
				maxAttempts := defaults[op.Category].MaxAttempts
				require.True(t, supportedKinds(op.Category, maxAttempts).has(op.Kind), "op %+v", op)
				if op.Kind == kindTransient {
					require.True(t, op.Failures >= 1 && op.Failures < maxAttempts, "op %+v", op)
				} else {
					require.Zero(t, op.Failures)
				}
			}
			require.Equal(t, allKinds, all, "every kind of outcome is planned")
			for _, c := range categories.All() {
				require.InDelta(t, 1000/17, counts[c], 1, "categories come in rounds: %s", c)
			}
		})
	}
}

// TestDemoServicesProducePlannedOutcomes runs every outcome each
// category's simulated service supports, once, and checks the audit
// events it leaves against the plan.
func TestDemoServicesProducePlannedOutcomes(t *testing.T) {
	s := natstest.Start(t)
	nc, js := s.JetStream(t)
	events := &audit.Memory{}
	mgr, err := retry.NewManager(retry.WithPolicies(demoPolicies()), retry.WithEmitter(events),
		retry.WithStore(idempotency.NewMemory(nil, 0)))
	require.NoError(t, err)
	ctx := context.Background()
	cf := connFlags{server: s.URL()}
	svcs, err := newDemoServices(ctx, "t1", "demo-t1", mgr, nc, js, cf.config("test"), 1)
	require.NoError(t, err)
	t.Cleanup(svcs.close)
	require.Zero(t, events.Len(), "setup has no failures")

	defaults := categories.Defaults()
	seq := 0
	for _, c := range categories.All() {
		maxAttempts := defaults[c].MaxAttempts
		for k := range numKinds {
			if !supportedKinds(c, maxAttempts).has(k) {
				continue
			}
			op := demoOp{Seq: seq, Category: c, Kind: k}
			seq++
			if k == kindTransient {
				op.Failures = maxAttempts - 1
			}
			t.Run(string(c)+"/"+k.String(), func(t *testing.T) {
				err := svcs.do(ctx, op)
				corr := svcs.correlation(op.Seq)
				got := events.Filter(func(e audit.Event) bool { return e.CorrelationID == corr })
				var attempts, exhausted, hits, records []audit.Event
				for _, e := range got {
					require.Equal(t, string(c), e.Category)
					require.Equal(t, "demo-t1", e.TenantID)
					switch {
					case e.Type == audit.TypeRetryAttempt:
						attempts = append(attempts, e)
					case e.Type == audit.TypeRetryExhausted:
						exhausted = append(exhausted, e)
					case e.Action == audit.ActionHit:
						hits = append(hits, e)
					case e.Action == audit.ActionRecord:
						records = append(records, e)
					}
				}
				keyed := demoCalls[c].keyed
				switch k {
				case kindOK, kindTransient, kindRateLimited, kindDuplicate:
					require.NoError(t, err)
					require.Empty(t, exhausted)
				default:
					require.Error(t, err)
					require.Len(t, exhausted, 1)
				}
				switch k {
				case kindOK, kindDuplicate:
					require.Empty(t, attempts)
				case kindTransient:
					require.Len(t, attempts, op.Failures)
					for i, e := range attempts {
						require.Equal(t, i+1, e.AttemptNumber)
					}
				case kindRateLimited:
					require.Len(t, attempts, 1)
					require.Equal(t, demoRetryAfter.Seconds(), attempts[0].DelaySeconds, "the hint is the delay")
				case kindPermanent:
					require.Empty(t, attempts)
					require.Equal(t, "permanent", exhausted[0].StopReason)
					require.Equal(t, 1, exhausted[0].TotalAttempts)
				case kindExhaust:
					require.Len(t, attempts, maxAttempts-1)
					require.Equal(t, "exhausted", exhausted[0].StopReason)
					require.Equal(t, maxAttempts, exhausted[0].TotalAttempts)
					require.NotEmpty(t, exhausted[0].FinalExceptionType)
				}
				wantHits, wantRecords := 0, 0
				if k == kindDuplicate {
					wantHits, wantRecords = 1, 1
				} else if keyed && err == nil {
					wantRecords = 1
				}
				require.Len(t, hits, wantHits)
				require.Len(t, records, wantRecords)
			})
		}
	}
}

// demoRun runs the demo command with the embedded server.
func demoRun(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("NATS_URL", "")
	var out, errOut bytes.Buffer
	code = Main(ctx, append([]string{"demo"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

// demoTableRows returns the table's rows by category: its cells.
func demoTableRows(t *testing.T, out string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && (categories.Known(retry.Category(f[0])) || f[0] == "TOTAL") {
			rows[f[0]] = f[1:]
		}
	}
	return rows
}

// demoJobRows returns the jobs table's rows by name: their RECORDS and
// AUDIT cells (-1 for "-").
func demoJobRows(t *testing.T, out string) map[string][2]int {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nJOBS ")
	require.True(t, ok, "a jobs table:\n%s", out)
	rows := map[string][2]int{}
	for _, line := range strings.Split(table, "\n")[1:] {
		if len(line) < 34 {
			break
		}
		var cells [2]int
		for i, f := range strings.Fields(line[18:34]) {
			if f == "-" {
				cells[i] = -1
				continue
			}
			n, err := strconv.Atoi(f)
			require.NoError(t, err, line)
			cells[i] = n
		}
		rows[strings.TrimSpace(line[:18])] = cells
	}
	return rows
}

func TestDemoEmbeddedShortRun(t *testing.T) {
	code, out, errOut := demoRun(t, context.Background(), "--duration", "1500ms", "--rate", "150")
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Contains(t, out, "embedded JetStream server at nats://127.0.0.1:")
	require.Contains(t, out, "225 operations over 1.5s at 150/s")
	require.Contains(t, out, "Read back from the audit stream JETRETRY_AUDIT")
	rows := demoTableRows(t, out)
	require.Len(t, rows, 18, out)
	for _, c := range categories.All() {
		events := 0
		for _, i := range []int{0, 1, 5, 6} { // attempts, exhausted, hits, records
			n, err := strconv.Atoi(rows[string(c)][i])
			require.NoError(t, err)
			events += n
		}
		require.Positive(t, events, "the stream holds events of %s:\n%s", c, out)
	}

	// The jobs: 22 planned, every one finished, each outcome seen, and
	// the records agree with the audit stream.
	require.Contains(t, out, "jobs: 22 on queue demo-reports")
	require.Contains(t, out, "Durable jobs on the queue demo-reports: 22 of 22 planned submitted")
	require.Contains(t, out, "One worker crash was simulated")
	jr := demoJobRows(t, out)
	require.Equal(t, [2]int{0, -1}, jr["unfinished"], out)
	for _, name := range []string{"success", "failed, final", "failed, exhausted", "retries", "rate-limited waits"} {
		require.Positive(t, jr[name][0], "%s:\n%s", name, out)
	}
	for _, name := range []string{"failed, final", "failed, exhausted", "retries", "rate-limited waits", "crashed runs"} {
		require.Equal(t, jr[name][0], jr[name][1], "records and audit agree on %s:\n%s", name, out)
	}
	require.Equal(t, [2]int{1, 1}, jr["crashed runs"], out)
	require.Equal(t, 22, jr["success"][0]+jr["failed, final"][0]+jr["failed, exhausted"][0], out)
	require.Equal(t, jr["failed, final"][0]+jr["failed, exhausted"][0], jr["dead letters"][0], out)
	require.Equal(t, 22+jr["retries"][0], jr["attempts"][0], out)
}

func TestDemoDataDirKeepsTheStream(t *testing.T) {
	dir := t.TempDir()
	var results [2]demoResult
	for i := range results {
		code, out, errOut := demoRun(t, context.Background(), "--data", dir, "--duration", "200ms", "--json")
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, errOut, "store in "+dir)
		require.NoError(t, json.Unmarshal([]byte(out), &results[i]))
		require.Positive(t, results[i].Events)
	}
	require.NotEqual(t, results[0].RunID, results[1].RunID)
	require.Equal(t, results[0].Events, results[1].Events, "the same seed gives the same run")
	require.Equal(t, results[0].StreamEvents+uint64(results[1].Events+results[1].Jobs.Audit.Events), results[1].StreamEvents,
		"the second run appends to the first run's stream")
	// Each run's jobs summary counts its own jobs only, though the bucket
	// and the dead letters hold both runs'.
	for _, r := range results {
		j := r.Jobs
		require.Equal(t, "demo-"+r.RunID+"/report/", j.KeyPrefix)
		require.Equal(t, demoJobCount(40), j.Submitted) // 200ms at 200/s
		require.Len(t, j.Jobs, j.Submitted)
		require.Equal(t, j.FailedFinal+j.FailedExhausted, j.DeadLetters)
		require.Equal(t, 1, j.CrashedRuns)
		for _, o := range j.Jobs {
			require.True(t, strings.HasPrefix(o.Key, j.KeyPrefix), o.Key)
		}
	}
	require.Equal(t, results[0].Jobs.DeadLetters, results[1].Jobs.DeadLetters, "the same seed gives the same jobs")
}

func TestDemoJobPlan(t *testing.T) {
	require.Equal(t, 6, demoJobCount(17))
	require.Equal(t, 100, demoJobCount(1000))
	require.Equal(t, demoMaxJobs, demoJobCount(demoMaxOps))
	require.Equal(t, planJobs(50, 3), planJobs(50, 3))
	require.NotEqual(t, planJobs(50, 3), planJobs(50, 4))
	maxAttempts := demoJobPolicy().MaxAttempts
	for seed := uint64(0); seed < 50; seed++ {
		plan := planJobs(100, seed)
		require.Len(t, plan, 100)
		require.Equal(t, jobCrash, plan[0].Kind, "the crash comes first")
		var first [numJobKinds]int
		for _, j := range plan[:numJobKinds] {
			first[j.Kind]++
		}
		require.Equal(t, [numJobKinds]int{1, 1, 1, 1, 1, 1}, first, "one of each kind first")
		for i, j := range plan {
			require.Equal(t, i, j.Seq)
			switch j.Kind {
			case jobTransient:
				require.True(t, j.Failures >= 1 && j.Failures < maxAttempts, "%+v", j)
			case jobRateLimited:
				require.True(t, j.Failures == 1 || j.Failures == 2, "%+v", j)
			default:
				require.Zero(t, j.Failures, "%+v", j)
			}
			if i > 0 {
				require.NotEqual(t, jobCrash, j.Kind, "one crash per run")
			}
		}
	}
}

func TestDemoJobHandler(t *testing.T) {
	ctx := context.Background()
	pol := demoJobPolicy()
	run := func(j demoJob, attempt int) error {
		b, err := json.Marshal(demoJobPayload{Run: "r", Seq: j.Seq, Plan: j.Kind.String(), Failures: j.Failures})
		require.NoError(t, err)
		return handleDemoJob(ctx, &jobs.Job{Key: "k", Payload: b, Attempt: attempt})
	}
	class := func(err error) retry.Class {
		c, _ := pol.Classify(err)
		return c
	}
	require.NoError(t, run(demoJob{Kind: jobOK}, 1))
	require.NoError(t, run(demoJob{Kind: jobCrash}, 2))
	for a := 1; a <= 2; a++ {
		require.Equal(t, retry.ClassRetryable, class(run(demoJob{Kind: jobTransient, Failures: 2}, a)))
	}
	require.NoError(t, run(demoJob{Kind: jobTransient, Failures: 2}, 3))
	err := run(demoJob{Kind: jobRateLimited, Failures: 1}, 1)
	c, after := pol.Classify(err)
	require.Equal(t, retry.ClassRateLimited, c)
	require.Equal(t, demoJobRetryAfter, after)
	require.NoError(t, run(demoJob{Kind: jobRateLimited, Failures: 1}, 2))
	require.Equal(t, retry.ClassPermanent, class(run(demoJob{Kind: jobFinal}, 1)))
	for a := 1; a <= pol.MaxAttempts; a++ {
		require.Equal(t, retry.ClassRetryable, class(run(demoJob{Kind: jobExhaust}, a)))
	}
	require.Equal(t, retry.ClassPermanent, class(handleDemoJob(ctx, &jobs.Job{Key: "k", Payload: []byte("{")})))
}

func TestDemoInterruptedStillReports(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	code, out, errOut := demoRun(t, ctx, "--duration", "30s", "--json")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, errOut, "interrupted: ")
	var res demoResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.True(t, res.Interrupted)
	require.Less(t, res.Operations, int64(res.Planned))
	require.Positive(t, res.Events)
	require.Len(t, res.Categories, 17)
	// The jobs submitted so far are reported; the demo did not wait.
	j := res.Jobs
	require.Equal(t, demoMaxJobs, j.Planned)
	require.Positive(t, j.Submitted)
	require.Less(t, j.Submitted, j.Planned)
	require.Equal(t, j.Submitted, j.Success+j.FailedFinal+j.FailedExhausted+j.FailedOther+j.Unfinished)
	require.Less(t, j.WaitedSeconds, 1.0)
}

func TestDemoErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unreachable server", []string{"--server", "nats://127.0.0.1:1", "--timeout", "300ms"}, ExitFailure, "cannot reach NATS at nats://127.0.0.1:1"},
		{"zero rate", []string{"--rate", "0"}, ExitUsage, "--rate must be positive"},
		{"zero workers", []string{"--workers", "0"}, ExitUsage, "--workers must be positive"},
		{"too many operations", []string{"--duration", "1h", "--rate", "1000"}, ExitUsage, "at most 1000000 operations"},
		{"argument", []string{"now"}, ExitUsage, `unexpected argument "now"`},
		{"bad server URL", []string{"--server", "http://x"}, ExitUsage, "URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := demoRun(t, context.Background(), tt.args...)
			require.Equal(t, tt.code, code)
			require.Contains(t, errOut, tt.msg)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "a one-line message: %q", errOut)
		})
	}
}

func TestDemoServerPrecedence(t *testing.T) {
	s := natstest.Start(t)
	tests := []struct {
		name, env string
		args      []string
		embedded  bool
	}{
		{"NATS_URL", s.URL(), nil, false},
		{"--server over NATS_URL", "nats://127.0.0.1:1", []string{"--server", s.URL()}, false},
		{"embedded without either", "", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("NATS_URL", tt.env)
			var out, errOut bytes.Buffer
			args := append([]string{"demo", "--duration", "100ms", "--json"}, tt.args...)
			require.Equal(t, ExitOK, Main(context.Background(), args, &out, &errOut), errOut.String())
			var res demoResult
			require.NoError(t, json.Unmarshal(out.Bytes(), &res))
			require.Equal(t, tt.embedded, res.Embedded)
			if !tt.embedded {
				require.Equal(t, s.URL(), res.Server)
			}
			require.Positive(t, res.Events)
		})
	}
}
