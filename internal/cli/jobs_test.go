package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/internal/natstest"
	"github.com/jetretry/jetretry/jobs"
	"github.com/jetretry/jetretry/retry"
)

// jobsServer starts a server with the jobs bucket and streams, and returns
// a jobs client on it.
func jobsServer(t *testing.T) (*natstest.Server, jetstream.JetStream, *jobs.Client) {
	t.Helper()
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := jobs.New(ctx, js, jobs.Config{})
	require.NoError(t, err)
	return s, js, c
}

// putJob stores rec as it is in the jobs bucket.
func putJob(t *testing.T, js jetstream.JetStream, rec jobs.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, jobs.DefaultBucket)
	require.NoError(t, err)
	rec.Version, rec.ID = jobs.RecordVersion, jobs.ID(rec.Key)
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	_, err = kv.Put(ctx, rec.ID, b)
	require.NoError(t, err)
}

// fixedJobs stores five jobs with fixed data, one in each state, and
// returns their keys, oldest first.
func fixedJobs(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	at := func(min, sec int) time.Time { return time.Date(2026, 11, 20, 6, min, sec, 0, time.UTC) }
	run := func(n int, attempt int, start time.Time, outcome jobs.Outcome, class jobs.ErrorClass, msg string) jobs.Run {
		return jobs.Run{
			RunID: fmt.Sprintf("019aa000-0000-7000-8000-00000000000%d", n), Owner: "worker-1:4242:ab12cd34",
			Attempt: attempt, StartedAt: start, EndedAt: start.Add(1500 * time.Millisecond),
			Outcome: outcome, ErrorClass: class, Error: msg,
		}
	}
	recs := []jobs.Record{
		{
			Queue: "etl", Key: "etl/customer-1/2026-11-20", Payload: []byte(`{"customer":1}`),
			Status: jobs.StatusFailed, AttemptCount: 1, LastError: "validator: schema mismatch: column \"amount\"",
			ErrorClass: jobs.ClassFinal, CreatedAt: at(0, 0), UpdatedAt: at(0, 2), Terminal: true, TerminalReason: jobs.TerminalFinal,
			History: []jobs.Run{run(1, 1, at(0, 0), jobs.OutcomeFailed, jobs.ClassFinal, "validator: schema mismatch: column \"amount\"")},
		},
		{
			Queue: "etl", Key: "etl/customer-2/2026-11-20", Payload: []byte("not json"),
			Status: jobs.StatusPending, AttemptCount: 2, BudgetUsed: 2, Dispatch: "d-2",
			LastError: "extract: upstream 503", ErrorClass: jobs.ClassRetryable, NextRetryAt: at(4, 0),
			CreatedAt: at(1, 0), UpdatedAt: at(2, 2),
			History: []jobs.Run{
				run(2, 1, at(1, 0), jobs.OutcomeFailed, jobs.ClassRetryable, "extract: upstream 503"),
				run(3, 2, at(2, 0), jobs.OutcomeFailed, jobs.ClassRetryable, "extract: upstream 503"),
			},
		},
		{
			// A reprocess whose rerun failed and waits for its retry: the
			// earlier success stays current.
			Queue: "etl", Key: "etl/customer-3/2026-11-20", Payload: []byte(`{"customer":3,"note":"<re-run>"}`),
			Status: jobs.StatusPending, AttemptCount: 2, BudgetUsed: 1, CurrentRunID: "019aa000-0000-7000-8000-000000000004",
			Dispatch: "d-3", LastError: "load: warehouse timeout", ErrorClass: jobs.ClassRetryable, NextRetryAt: at(9, 0),
			CreatedAt: at(2, 0), UpdatedAt: at(8, 2), Reprocess: true,
			History: []jobs.Run{
				run(4, 1, at(2, 0), jobs.OutcomeSuccess, "", ""),
				func() jobs.Run {
					r := run(5, 2, at(8, 0), jobs.OutcomeFailed, jobs.ClassRetryable, "load: warehouse timeout")
					r.Reprocess = true
					return r
				}(),
			},
			Policy: &retry.Policy{MaxAttempts: 5, BaseDelay: time.Minute, MaxDelay: time.Hour, Multiplier: 2},
		},
		{
			Queue: "etl", Key: "etl/customer-4/2026-11-20", Status: jobs.StatusFailed, AttemptCount: 8, BudgetUsed: 8,
			LastError: strings.Repeat("extract: upstream 503 ", 5), ErrorClass: jobs.ClassRetryable,
			CreatedAt: at(3, 0), UpdatedAt: at(7, 0), Terminal: true, TerminalReason: jobs.TerminalMaxAttempts,
		},
		{
			Queue: "reports", Key: "reports/daily/2026-11-20", Status: jobs.StatusRunning, AttemptCount: 1,
			Dispatch: "d-5", CreatedAt: at(5, 0), UpdatedAt: at(5, 1),
			Run: &jobs.Run{RunID: "019aa000-0000-7000-8000-000000000006", Owner: "worker-2:77:ef56ab78",
				Attempt: 1, StartedAt: at(5, 1), LeaseUntil: at(5, 31)},
		},
	}
	keys := make([]string, 0, len(recs))
	for _, r := range recs {
		putJob(t, js, r)
		keys = append(keys, r.Key)
	}
	return keys
}

// listKeys runs "jobs list --json" with args and returns the keys listed.
func listKeys(t *testing.T, url string, args ...string) []string {
	t.Helper()
	code, out, errOut := run(t, append([]string{"jobs", "list", "--server", url, "--json"}, args...)...)
	require.Equal(t, ExitOK, code, errOut)
	var got []jobJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	keys := make([]string, 0, len(got))
	for _, j := range got {
		keys = append(keys, j.Key)
	}
	return keys
}

func TestJobsList(t *testing.T) {
	s, js, _ := jobsServer(t)
	keys := fixedJobs(t, js)

	code, out, errOut := run(t, "jobs", "list", "--server", s.URL())
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	golden(t, "jobs_list.txt", out)

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"all", nil, keys},
		{"queue", []string{"--queue", "reports"}, keys[4:]},
		{"status", []string{"--status", "failed"}, []string{keys[0], keys[3]}},
		{"pending in etl", []string{"--queue", "etl", "--status", "pending"}, keys[1:3]},
		{"terminal", []string{"--terminal"}, []string{keys[0], keys[3]}},
		{"not terminal", []string{"--terminal=false"}, []string{keys[1], keys[2], keys[4]}},
		{"limit", []string{"--limit", "2"}, keys[:2]},
		{"none", []string{"--queue", "nope"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, listKeys(t, s.URL(), tt.args...))
		})
	}

	code, out, errOut = run(t, "jobs", "list", "--server", s.URL(), "--status", "running")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "reports/daily/2026-11-20  reports  running")
	code, out, errOut = run(t, "jobs", "list", "--server", s.URL(), "--queue", "nope")
	require.Equal(t, ExitOK, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry jobs list: no matching jobs\n", errOut)
}

func TestJobsInspectGolden(t *testing.T) {
	s, js, _ := jobsServer(t)
	keys := fixedJobs(t, js)

	code, out, errOut := run(t, "jobs", "inspect", keys[2], "--server", s.URL(), "--json")
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "jobs_inspect.json", out)
	var got jobJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.JSONEq(t, `{"customer":3,"note":"<re-run>"}`, string(got.Payload), "the payload is raw JSON")

	code, out, errOut = run(t, "jobs", "inspect", "--server", s.URL(), keys[2])
	require.Equal(t, ExitOK, code, errOut)
	golden(t, "jobs_inspect.txt", out)

	code, out, _ = run(t, "jobs", "inspect", "--server", s.URL(), keys[4])
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "running:        run 019aa000-0000-7000-8000-000000000006 (attempt 1) on worker-2:77:ef56ab78 since 2026-11-20T06:05:01.000Z, lease until 2026-11-20T06:05:31.000Z\n")
	require.Contains(t, out, "\nno runs yet\n")

	code, out, _ = run(t, "jobs", "inspect", "--server", s.URL(), keys[1], "--json")
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, `"payload": "not json"`, "a payload that is not JSON is a string")

	code, out, errOut = run(t, "jobs", "inspect", "--server", s.URL(), "etl/nope")
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry jobs inspect: no job with key \"etl/nope\" in bucket JETRETRY_JOBS\n", errOut)
}

// jobsWorld is a server with a worker on queue etl whose handler fails
// for good on payload "final", until the job's key is healed, and
// succeeds otherwise.
type jobsWorld struct {
	s      *natstest.Server
	js     jetstream.JetStream
	c      *jobs.Client
	healed sync.Map
}

func newJobsWorld(t *testing.T) *jobsWorld {
	t.Helper()
	w := &jobsWorld{}
	w.s, w.js, w.c = jobsServer(t)
	startJobsWorker(t, w.c, "etl", 2, func(_ context.Context, j *jobs.Job) error {
		if _, ok := w.healed.Load(j.Key); !ok && string(j.Payload) == "final" {
			return retry.Permanent(errors.New("validator: schema mismatch"))
		}
		return nil
	})
	return w
}

// startJobsWorker runs a worker until the returned stop is called or the
// test ends.
func startJobsWorker(t *testing.T, c *jobs.Client, queue string, n int, h jobs.Handler) (stop func()) {
	t.Helper()
	w, err := jobs.NewWorker(c, queue, h, jobs.WorkerConfig{Concurrency: n, Owner: "cli-test"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(ctx) })
	stop = sync.OnceFunc(func() { cancel(); wg.Wait() })
	t.Cleanup(stop)
	return stop
}

// submitJobs submits jobs with payload to queue.
func submitJobs(t *testing.T, c *jobs.Client, queue, payload string, keys ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, k := range keys {
		_, _, err := c.Submit(ctx, queue, k, []byte(payload), jobs.SubmitOptions{})
		require.NoError(t, err)
	}
}

// waitJobStatus waits, boundedly, until every key has status st, and
// returns their records.
func waitJobStatus(t *testing.T, c *jobs.Client, st jobs.Status, keys ...string) []jobs.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	out := make([]jobs.Record, len(keys))
	for i, k := range keys {
		for {
			rec, err := c.Get(context.Background(), k)
			if err == nil && rec.Status == st {
				out[i] = rec
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s: not %s in time: %+v (%v)", k, st, rec, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return out
}

// jobOverrides returns the manual_override events of the audit stream
// about job key.
func jobOverrides(t *testing.T, js jetstream.JetStream, key string) []audit.Event {
	t.Helper()
	var out []audit.Event
	for _, e := range manualOverrides(t, js) {
		if e.AdditionalContext["job_key"] == key {
			out = append(out, e)
		}
	}
	return out
}

func TestJobsRequeue(t *testing.T) {
	t.Setenv("USER", "ops-alice")
	w := newJobsWorld(t)
	url := w.s.URL()
	submitJobs(t, w.c, "etl", "final", "etl/a", "etl/b")
	submitJobs(t, w.c, "etl", "ok", "etl/ok")
	failed := waitJobStatus(t, w.c, jobs.StatusFailed, "etl/a", "etl/b")
	waitJobStatus(t, w.c, jobs.StatusSuccess, "etl/ok")

	// inspect shows the failed run.
	code, out, errOut := run(t, "jobs", "inspect", "etl/a", "--server", url, "--json")
	require.Equal(t, ExitOK, code, errOut)
	var got jobJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Equal(t, jobs.StatusFailed, got.Status)
	require.True(t, got.Terminal)
	require.Equal(t, jobs.TerminalFinal, got.TerminalReason)
	require.Len(t, got.History, 1)
	require.Equal(t, failed[0].History[0].RunID, got.History[0].RunID)
	require.NotEmpty(t, got.History[0].RunID)
	require.Equal(t, jobs.OutcomeFailed, got.History[0].Outcome)
	require.Equal(t, jobs.ClassFinal, got.History[0].ErrorClass)
	require.Contains(t, got.History[0].Error, "validator: schema mismatch")
	require.False(t, got.History[0].EndedAt.IsZero())
	require.Equal(t, time.UTC, got.UpdatedAt.Location())

	// A requeue of a failed job: pending, dispatched, audited with the
	// reason; the worker now runs it to success.
	w.healed.Store("etl/a", true)
	code, out, errOut = run(t, "jobs", "requeue", "etl/a", "--server", url, "--reason", "schema fixed")
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Regexp(t, `^requeued "etl/a": pending in queue etl \(was final, attempt_count 1\); audit event \S+\n$`, out)
	rec := waitJobStatus(t, w.c, jobs.StatusSuccess, "etl/a")[0]
	require.Equal(t, 2, rec.AttemptCount)
	ev := jobOverrides(t, w.js, "etl/a")
	require.Len(t, ev, 1)
	require.Contains(t, out, ev[0].EventID)
	require.Equal(t, "requeue", ev[0].AdditionalContext["override"])
	require.Equal(t, "schema fixed", ev[0].AdditionalContext["reason"])
	require.Equal(t, "ops-alice", ev[0].AdditionalContext["operator"])
	require.Equal(t, "jetretry jobs requeue", ev[0].AdditionalContext["command"])
	require.Equal(t, "final", ev[0].AdditionalContext["previous_terminal_reason"])

	// Not failed: that job's error, exit 1, one line.
	code, out, errOut = run(t, "jobs", "requeue", "etl/ok", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, `jetretry jobs requeue: jobs: invalid transition: requeue of job "etl/ok" in status success: only a failed job can be requeued`+"\n", errOut)

	// Several keys: per-key results, a summary, exit 1 when any failed.
	code, out, errOut = run(t, "jobs", "requeue", "etl/b", "etl/ok", "etl/missing", "etl/b", "--server", url)
	require.Equal(t, ExitFailure, code)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 4, out)
	require.Regexp(t, `^requeued "etl/b": pending in queue etl`, lines[0])
	require.Equal(t, `not requeued "etl/ok": jobs: invalid transition: requeue of job "etl/ok" in status success: only a failed job can be requeued`, lines[1])
	require.Equal(t, `not requeued "etl/missing": no job with key "etl/missing" in bucket JETRETRY_JOBS`, lines[2])
	require.Equal(t, "requeued 1 of 3 jobs, 2 not requeued", lines[3])
	require.Equal(t, "jetretry jobs requeue: 2 of 3 jobs were not requeued\n", errOut)
	require.Len(t, jobOverrides(t, w.js, "etl/b"), 1)
	require.Empty(t, jobOverrides(t, w.js, "etl/ok"), "a refused requeue is not an override")
}

func TestJobsReprocessCancel(t *testing.T) {
	w := newJobsWorld(t)
	url := w.s.URL()
	submitJobs(t, w.c, "etl", "ok", "etl/ok")
	submitJobs(t, w.c, "etl", "final", "etl/bad")
	submitJobs(t, w.c, "idle", "", "idle/1") // no worker: stays pending
	first := waitJobStatus(t, w.c, jobs.StatusSuccess, "etl/ok")[0]
	waitJobStatus(t, w.c, jobs.StatusFailed, "etl/bad")

	code, out, errOut := run(t, "jobs", "reprocess", "etl/ok", "--server", url, "--reason", "validator fixed")
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `^reprocessing "etl/ok": pending in queue etl; run `+first.CurrentRunID+` stays current unless the rerun succeeds; audit event \S+\n$`, out)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := w.c.Get(context.Background(), "etl/ok")
		require.NoError(t, err)
		if rec.Status == jobs.StatusSuccess && len(rec.History) == 2 {
			require.True(t, rec.History[1].Reprocess)
			require.Equal(t, rec.History[1].RunID, rec.CurrentRunID)
			break
		}
		require.True(t, time.Now().Before(deadline), "the reprocess did not run: %+v", rec)
		time.Sleep(20 * time.Millisecond)
	}
	ev := jobOverrides(t, w.js, "etl/ok")
	require.Len(t, ev, 1)
	require.Equal(t, "reprocess", ev[0].AdditionalContext["override"])
	require.Equal(t, "validator fixed", ev[0].AdditionalContext["reason"])

	code, out, errOut = run(t, "jobs", "reprocess", "etl/bad", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, `jetretry jobs reprocess: jobs: invalid transition: reprocess of job "etl/bad" in status failed: only a successful job can be reprocessed`+"\n", errOut)

	code, out, errOut = run(t, "jobs", "cancel", "idle/1", "--server", url, "--reason", "not needed")
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `^cancelled "idle/1": failed, terminal \(manual\); audit event \S+\n$`, out)
	rec, err := w.c.Get(context.Background(), "idle/1")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusFailed, rec.Status)
	require.Equal(t, jobs.TerminalManual, rec.TerminalReason)
	ev = jobOverrides(t, w.js, "idle/1")
	require.Len(t, ev, 1)
	require.Equal(t, "cancel", ev[0].AdditionalContext["override"])
	require.Equal(t, "not needed", ev[0].AdditionalContext["reason"])

	for _, key := range []string{"idle/1", "etl/ok"} {
		code, out, errOut = run(t, "jobs", "cancel", key, "--server", url)
		require.Equal(t, ExitFailure, code)
		require.Empty(t, out)
		require.Contains(t, errOut, "only a pending or running job can be cancelled")
		requireOneLine(t, errOut)
	}
	code, _, errOut = run(t, "jobs", "cancel", "nope", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Equal(t, "jetretry jobs cancel: no job with key \"nope\" in bucket JETRETRY_JOBS\n", errOut)
}

// runMessages returns how many dispatches of queue the work stream holds.
func runMessages(t *testing.T, js jetstream.JetStream, queue string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, jobs.DefaultStream)
	require.NoError(t, err)
	subj := jobs.RunSubject(queue)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	require.NoError(t, err)
	return info.State.Subjects[subj]
}

func TestJobsKick(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, js, c := jobsServer(t)
	url := s.URL()
	submitJobs(t, c, "kick", "", "kick/a")

	// Lose the dispatch: no worker exists yet, so it is still queued.
	require.EqualValues(t, 1, runMessages(t, js, "kick"))
	st, err := js.Stream(ctx, jobs.DefaultStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject(jobs.RunSubject("kick"))))
	require.Zero(t, runMessages(t, js, "kick"))
	before, err := c.Get(ctx, "kick/a")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusPending, before.Status)

	// Kick: one dispatch, the record as it was, no audit event (the audit
	// stream is not even created).
	code, out, errOut := run(t, "jobs", "kick", "kick/a", "--server", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, `kicked "kick/a": dispatched again under its current token`+"\n", out)
	require.EqualValues(t, 1, runMessages(t, js, "kick"))
	after, err := c.Get(ctx, "kick/a")
	require.NoError(t, err)
	require.Equal(t, before, after, "kick does not change the record")
	_, err = js.Stream(ctx, audit.DefaultStreamName)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "kick is not audited")

	// The dispatch runs the job.
	var runs sync.Map
	startJobsWorker(t, c, "kick", 1, func(_ context.Context, j *jobs.Job) error {
		runs.Store(j.Key, true)
		return nil
	})
	rec := waitJobStatus(t, c, jobs.StatusSuccess, "kick/a")[0]
	require.Equal(t, 1, rec.AttemptCount)
	_, ran := runs.Load("kick/a")
	require.True(t, ran)

	// Not pending: the invalid transition, exit 1, one line.
	code, out, errOut = run(t, "jobs", "kick", "kick/a", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, `jetretry jobs kick: jobs: invalid transition: kick of job "kick/a" in status success: only a pending job can be kicked`+"\n", errOut)

	// Missing: exit 1, one line.
	code, out, errOut = run(t, "jobs", "kick", "kick/missing", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Equal(t, `jetretry jobs kick: no job with key "kick/missing" in bucket JETRETRY_JOBS`+"\n", errOut)

	// Several keys: per-key results, a summary, exit 1 when any failed.
	submitJobs(t, c, "idle", "", "idle/1") // no worker: stays pending
	code, out, errOut = run(t, "jobs", "kick", "idle/1", "kick/a", "kick/missing", "idle/1", "--server", url)
	require.Equal(t, ExitFailure, code)
	require.Equal(t, []string{
		`kicked "idle/1": dispatched again under its current token`,
		`not kicked "kick/a": jobs: invalid transition: kick of job "kick/a" in status success: only a pending job can be kicked`,
		`not kicked "kick/missing": no job with key "kick/missing" in bucket JETRETRY_JOBS`,
		"kicked 1 of 3 jobs, 2 not kicked",
	}, strings.Split(strings.TrimSuffix(out, "\n"), "\n"))
	require.Equal(t, "jetretry jobs kick: 2 of 3 jobs were not kicked\n", errOut)
	require.EqualValues(t, 2, runMessages(t, js, "idle"), "the submit's dispatch and the kick's")
	_, err = js.Stream(ctx, audit.DefaultStreamName)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "kick is not audited")
}

func TestJobsSweep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, js, c := jobsServer(t)
	url := s.URL()
	submitJobs(t, c, "sweep", "", "sweep/a")   // its dispatch is lost below
	submitJobs(t, c, "queued", "", "queued/b") // no worker: its dispatch waits, it is not stranded

	st, err := js.Stream(ctx, jobs.DefaultStream)
	require.NoError(t, err)
	require.NoError(t, st.Purge(ctx, jetstream.WithPurgeSubject(jobs.RunSubject("sweep"))))
	require.Zero(t, runMessages(t, js, "sweep"))
	before, err := c.Get(ctx, "sweep/a")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusPending, before.Status)

	// Within the default grace of a minute, nothing is stranded.
	code, out, errOut := run(t, "jobs", "sweep", "--server", url, "--dry-run")
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, "no stranded jobs\n", out)

	const grace = "250ms"
	time.Sleep(500 * time.Millisecond) // past the grace

	// --dry-run names the stranded job and dispatches nothing.
	stranded := fmt.Sprintf("stranded %q in queue sweep, due %s: ", "sweep/a", jobTime(before.UpdatedAt))
	code, out, errOut = run(t, "jobs", "sweep", "--server", url, "--grace", grace, "--dry-run")
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, stranded+"would dispatch (dry run)\nfound 1 stranded job (dry run: nothing dispatched)\n", out)
	require.Zero(t, runMessages(t, js, "sweep"))

	// --json prints the records, as "jobs list --json" does.
	code, out, errOut = run(t, "jobs", "sweep", "--server", url, "--grace", grace, "--dry-run", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var got []jobJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	require.Len(t, got, 1)
	require.Equal(t, "sweep/a", got[0].Key)
	require.Equal(t, jobs.StatusPending, got[0].Status)
	require.Zero(t, runMessages(t, js, "sweep"))

	// Another queue: nothing stranded.
	code, out, errOut = run(t, "jobs", "sweep", "--server", url, "--grace", grace, "--queue", "queued")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "no stranded jobs\n", out)
	require.EqualValues(t, 1, runMessages(t, js, "queued"), "the submit's dispatch only")

	// Sweep: one dispatch, the record as it was, no audit event (the audit
	// stream is not even created).
	code, out, errOut = run(t, "jobs", "sweep", "--server", url, "--grace", grace)
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, stranded+"dispatched again\nswept 1 stranded job\n", out)
	require.EqualValues(t, 1, runMessages(t, js, "sweep"))
	require.EqualValues(t, 1, runMessages(t, js, "queued"))
	after, err := c.Get(ctx, "sweep/a")
	require.NoError(t, err)
	require.Equal(t, before, after, "sweep does not change the record")
	_, err = js.Stream(ctx, audit.DefaultStreamName)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "sweep is not audited")

	// The dispatch runs the job.
	startJobsWorker(t, c, "sweep", 1, func(context.Context, *jobs.Job) error { return nil })
	rec := waitJobStatus(t, c, jobs.StatusSuccess, "sweep/a")[0]
	require.Equal(t, 1, rec.AttemptCount)
}

func TestWriteSweep(t *testing.T) {
	at := time.Date(2026, 11, 20, 6, 0, 0, 0, time.UTC)
	a := jobs.Record{Key: "etl/a", Queue: "etl", UpdatedAt: at}
	b := jobs.Record{Key: "etl/b", Queue: "etl", UpdatedAt: at, NextRetryAt: at.Add(time.Minute)}
	tests := []struct {
		name   string
		done   []jobs.Record
		dryRun bool
		failed bool
		want   string
	}{
		{name: "none", want: "no stranded jobs\n"},
		{name: "none, dry run", dryRun: true, want: "no stranded jobs\n"},
		{name: "swept", done: []jobs.Record{a, b}, want: `stranded "etl/a" in queue etl, due 2026-11-20T06:00:00.000Z: dispatched again
stranded "etl/b" in queue etl, due 2026-11-20T06:01:00.000Z: dispatched again
swept 2 stranded jobs
`},
		{name: "dry run", done: []jobs.Record{b}, dryRun: true, want: `stranded "etl/b" in queue etl, due 2026-11-20T06:01:00.000Z: would dispatch (dry run)
found 1 stranded job (dry run: nothing dispatched)
`},
		{name: "failed", done: []jobs.Record{a}, failed: true, want: `stranded "etl/a" in queue etl, due 2026-11-20T06:00:00.000Z: dispatched again
swept 1 stranded job before the error; sweep again to finish
`},
		{name: "failed at once", failed: true, want: ""},
		{name: "failed, dry run", done: []jobs.Record{a}, dryRun: true, failed: true, want: `stranded "etl/a" in queue etl, due 2026-11-20T06:00:00.000Z: would dispatch (dry run)
found 1 stranded job before the error (dry run: nothing dispatched)
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			require.NoError(t, writeSweep(&b, tt.done, tt.dryRun, tt.failed))
			require.Equal(t, tt.want, b.String())
		})
	}
}

func TestJobsDead(t *testing.T) {
	w := newJobsWorld(t)
	url := w.s.URL()
	submitJobs(t, w.c, "etl", "final", "etl/d1", "etl/d2")
	submitJobs(t, w.c, "etl", "ok", "etl/ok")
	failed := waitJobStatus(t, w.c, jobs.StatusFailed, "etl/d1", "etl/d2")
	stop := startJobsWorker(t, w.c, "other", 1, func(context.Context, *jobs.Job) error {
		return retry.Permanent(errors.New("other: gone"))
	})
	submitJobs(t, w.c, "other", "", "other/d3")
	waitJobStatus(t, w.c, jobs.StatusFailed, "other/d3")
	stop()

	deadKeys := func(args ...string) []string {
		t.Helper()
		code, out, errOut := run(t, append([]string{"jobs", "dead", "--server", url, "--json"}, args...)...)
		require.Equal(t, ExitOK, code, errOut)
		var got []jobJSON
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		var keys []string
		for _, j := range got {
			require.Equal(t, jobs.StatusFailed, j.Status)
			require.Equal(t, jobs.TerminalFinal, j.TerminalReason)
			require.Len(t, j.History, 1)
			keys = append(keys, j.Key)
		}
		return keys
	}
	first, second := "etl/d1", "etl/d2"
	if failed[1].UpdatedAt.Before(failed[0].UpdatedAt) {
		first, second = second, first
	}
	require.ElementsMatch(t, []string{"etl/d1", "etl/d2", "other/d3"}, deadKeys())
	require.Equal(t, []string{first, second}, deadKeys("--queue", "etl"))
	require.Equal(t, []string{first}, deadKeys("--queue", "etl", "--limit", "1"))
	require.Equal(t, []string{"other/d3"}, deadKeys("--queue", "other"))

	code, out, errOut := run(t, "jobs", "dead", "--server", url, "--queue", "other")
	require.Equal(t, ExitOK, code, errOut)
	require.Regexp(t, `^FAILED +KEY +QUEUE +REASON +ATTEMPTS +CLASS +LAST ERROR\n\S+Z  other/d3  other  final   1         final  other: gone\n$`, out)

	code, out, errOut = run(t, "jobs", "dead", "--server", url, "--queue", "idle")
	require.Equal(t, ExitOK, code)
	require.Empty(t, out)
	require.Equal(t, "jetretry jobs dead: no dead letters\n", errOut)
}

func TestJobsRequeueRange(t *testing.T) {
	t.Setenv("USER", "ops-bob")
	s, js, c := jobsServer(t)
	url := s.URL()
	const n = requeueConfirmAbove + 1
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("bulk/%03d", i)
	}
	stop := startJobsWorker(t, c, "bulk", 8, func(context.Context, *jobs.Job) error {
		return retry.Permanent(errors.New("bulk: broken"))
	})
	submitJobs(t, c, "bulk", "", keys...)
	submitJobs(t, c, "bulk2", "", "bulk2/pending")
	waitJobStatus(t, c, jobs.StatusFailed, keys...)
	stop() // requeued jobs stay pending

	// Over the threshold without --yes: refused, exit 2, nothing changed.
	code, out, errOut := run(t, "jobs", "requeue", "--queue", "bulk", "--status", "failed", "--server", url)
	require.Equal(t, ExitUsage, code)
	require.Empty(t, out)
	require.Equal(t, fmt.Sprintf("jetretry jobs requeue: %d jobs selected, more than 100: add --yes to requeue them all, or narrow the selection (--limit; --dry-run lists it)\n", n), errOut)
	require.Len(t, listKeys(t, url, "--queue", "bulk", "--status", "failed"), n)

	// --dry-run lists the selection and changes nothing.
	code, out, errOut = run(t, "jobs", "requeue", "--queue", "bulk", "--server", url, "--dry-run", "--terminal")
	require.Equal(t, ExitOK, code, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, n+1)
	require.Equal(t, `would requeue "bulk/000": failed in queue bulk (final, attempt_count 1, bulk: broken)`, lines[0], "oldest first")
	require.Equal(t, fmt.Sprintf("would requeue %d of %d jobs (dry run: nothing changed)", n, n), lines[n])
	require.Len(t, listKeys(t, url, "--queue", "bulk", "--status", "failed"), n)
	require.Empty(t, manualOverrides(t, js))

	// --limit narrows the selection under the threshold.
	code, out, errOut = run(t, "jobs", "requeue", "--queue", "bulk", "--limit", "3", "--server", url, "--reason", "retry three")
	require.Equal(t, ExitOK, code, errOut)
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.Len(t, lines, 4)
	require.Equal(t, "requeued 3 of 3 jobs, 0 not requeued", lines[3])
	require.Len(t, listKeys(t, url, "--queue", "bulk", "--status", "pending"), 3)

	// --yes confirms; the jobs already pending are not selected.
	code, out, errOut = run(t, "jobs", "requeue", "--queue", "bulk", "--status", "failed", "--yes", "--server", url, "--reason", "replay")
	require.Equal(t, ExitOK, code, errOut)
	require.True(t, strings.HasSuffix(out, fmt.Sprintf("\nrequeued %d of %d jobs, 0 not requeued\n", n-3, n-3)), out)
	require.Len(t, listKeys(t, url, "--queue", "bulk", "--status", "pending"), n)
	require.Equal(t, []string{"bulk2/pending"}, listKeys(t, url, "--queue", "bulk2"), "other queues are not touched")
	events := manualOverrides(t, js)
	require.Len(t, events, n)
	for _, e := range events {
		require.Equal(t, "requeue", e.AdditionalContext["override"])
		require.Equal(t, "ops-bob", e.AdditionalContext["operator"])
	}

	code, _, errOut = run(t, "jobs", "requeue", "--queue", "bulk", "--server", url)
	require.Equal(t, ExitOK, code)
	require.Equal(t, "jetretry jobs requeue: no failed jobs in queue bulk match\n", errOut)
}

func TestJobsMissingStorage(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmds := [][]string{
		{"jobs", "list"}, {"jobs", "inspect", "k"}, {"jobs", "dead"},
		{"jobs", "requeue", "k"}, {"jobs", "requeue", "--queue", "q"}, {"jobs", "reprocess", "k"}, {"jobs", "cancel", "k"},
		{"jobs", "kick", "k"}, {"jobs", "sweep"},
	}
	for _, args := range cmds {
		code, out, errOut := run(t, append(args, "--server", s.URL())...)
		require.Equal(t, ExitFailure, code)
		require.Empty(t, out)
		require.Equal(t, "jetretry "+strings.Join(args[:2], " ")+": no jobs bucket JETRETRY_JOBS at "+s.URL()+
			` (run a worker or "jetretry demo" first)`+"\n", errOut)
	}
	_, err := js.KeyValue(ctx, jobs.DefaultBucket)
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "the CLI never creates the bucket")
	_, err = js.Stream(ctx, audit.DefaultStreamName)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "nor the audit stream when nothing is changed")

	_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: jobs.DefaultBucket})
	require.NoError(t, err)
	code, _, errOut := run(t, "jobs", "dead", "--server", s.URL())
	require.Equal(t, ExitFailure, code)
	require.Equal(t, "jetretry jobs dead: no jobs stream JETRETRY_JOBS_WORK at "+s.URL()+` (run a worker or "jetretry demo" first)`+"\n", errOut)
	_, err = js.Stream(ctx, jobs.DefaultStream)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)

	code, _, errOut = run(t, "jobs", "list", "--server", s.URL(), "--bucket", "OTHER")
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "no jobs bucket OTHER at ")
}
