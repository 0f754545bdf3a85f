package test

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/jobs"
)

// TestJobsCrashedWorkerProcess kills a worker process (SIGKILL) in the
// middle of a handler; a worker in this process runs the job again after
// the lease, under a new run_id, and the dead run is recorded as crashed.
func TestJobsCrashedWorkerProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a helper binary")
	}
	env := newJobsEnv(t)
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "jobsworker")
	build := exec.Command("go", "build", "-o", bin, "./jobsworker")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))

	cmd := exec.Command(bin, "-server", env.s.URL(), "-queue", "crash", "-block", "victim", "-lease", "2s")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	_, _, err = env.c.Submit(ctx, "crash", "victim", []byte("x"), jobs.SubmitOptions{})
	require.NoError(t, err)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	fields := strings.Fields(line)
	require.Len(t, fields, 3, line)
	deadRun := fields[1]

	running, err := env.c.Get(ctx, "victim")
	require.NoError(t, err)
	require.Equal(t, jobs.StatusRunning, running.Status)
	require.Equal(t, deadRun, running.Run.RunID)
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	var mu sync.Mutex
	var rerun string
	var calls atomic.Int32
	startWorker(t, env.c, "crash", func(ctx context.Context, j *jobs.Job) error {
		calls.Add(1)
		mu.Lock()
		rerun = j.RunID
		mu.Unlock()
		return nil
	}, jobs.WorkerConfig{Lease: 2 * time.Second})

	got := waitJob(t, env.c, "victim", 15*time.Second, isStatus(jobs.StatusSuccess))
	require.Equal(t, int32(1), calls.Load())
	require.Equal(t, 2, got.AttemptCount)
	require.Greater(t, got.AttemptCount, running.AttemptCount)
	require.Len(t, got.History, 2)
	require.Equal(t, deadRun, got.History[0].RunID)
	require.Equal(t, jobs.OutcomeCrashed, got.History[0].Outcome)
	require.Equal(t, jobs.ClassCrashed, got.History[0].ErrorClass)
	mu.Lock()
	require.Equal(t, rerun, got.CurrentRunID)
	mu.Unlock()
	require.NotEqual(t, deadRun, got.CurrentRunID)
	ev := jobEvents(env.audit, audit.TypeRetryAttempt, "victim")
	require.Len(t, ev, 1)
	require.Equal(t, "crashed", ev[0].ExceptionType)
	require.Equal(t, 1, ev[0].AttemptNumber)
}
