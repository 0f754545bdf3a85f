package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
	"github.com/jetretry/jetretry/retry"
)

// Groups measured against raw nats.go on an embedded JetStream server.
const (
	GroupKVClaim1  = "KVClaimComplete/1"
	GroupKVClaim32 = "KVClaimComplete/32"
	GroupKVHit     = "KVHit"
	GroupAuditEmit = "AuditEmit"
	// JetretryCreateFirst is jetretry with the KV store's ClaimCreateFirst
	// mode; plain jetretry uses the default, ClaimAdaptive.
	JetretryCreateFirst = "jetretry-createfirst"
)

// Goals are the throughput goals: jetretry's ops/s ÷ raw's.
var Goals = map[string]float64{
	GroupKVClaim1:  0.8,
	GroupKVClaim32: 0.8,
	GroupKVHit:     0.9,
	GroupAuditEmit: 0.8,
}

// VariantGoals are goals for a jetretry variant's throughput ÷ plain
// jetretry's in the same group, keyed by group/variant.
var VariantGoals = map[string]float64{}

// natsEnv is one embedded JetStream server (file storage in a temp dir)
// shared by the NATS cases of a process.
type natsEnv struct {
	srv *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	dir string
}

var (
	envOnce sync.Once
	env     *natsEnv
	envErr  error
	seq     atomic.Int64 // unique names across runs
)

func getEnv() (*natsEnv, error) {
	envOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jetretry-bench-")
		if err != nil {
			envErr = err
			return
		}
		srv, err := server.NewServer(&server.Options{
			Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: dir,
		})
		if err != nil {
			envErr = err
			return
		}
		go srv.Start()
		if !srv.ReadyForConnections(10 * time.Second) {
			envErr = fmt.Errorf("bench: nats-server not ready")
			return
		}
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			envErr = err
			return
		}
		js, err := jetstream.New(nc)
		if err != nil {
			envErr = err
			return
		}
		env = &natsEnv{srv: srv, nc: nc, js: js, dir: dir}
	})
	return env, envErr
}

// Shutdown stops the shared server, if one was started, and removes its
// store.
func Shutdown() {
	if env == nil {
		return
	}
	env.nc.Close()
	env.srv.Shutdown()
	env.srv.WaitForShutdown()
	os.RemoveAll(env.dir)
}

func natsCases() []Case {
	return []Case{
		{GroupKVClaim1, Raw, kvClaimRaw(1), nil},
		{GroupKVClaim1, Jetretry, kvClaimJetretry(1), nil},
		{GroupKVClaim32, Raw, kvClaimRaw(32), nil},
		{GroupKVClaim32, Jetretry, kvClaimJetretry(32), nil},
		{GroupKVHit, Raw, kvHitRaw, nil},
		{GroupKVHit, Jetretry, kvHitJetretry(idempotency.ClaimAdaptive), nil},
		{GroupKVHit, JetretryCreateFirst, kvHitJetretry(idempotency.ClaimCreateFirst), nil},
		{GroupAuditEmit, Raw, auditRaw, nil},
		{GroupAuditEmit, Jetretry, auditJetretry, nil},
	}
}

func mustEnv(b *testing.B) *natsEnv {
	b.Helper()
	e, err := getEnv()
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func bucket(b *testing.B, e *natsEnv) jetstream.KeyValue {
	b.Helper()
	// The same bucket settings as the idempotency store's defaults (file
	// storage, 24 h TTL), so that only the client side differs.
	kv, err := e.js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{
		Bucket: "BENCH_" + strconv.FormatInt(seq.Add(1), 10), Storage: jetstream.FileStorage,
		TTL: idempotency.DefaultKVTTL,
	})
	if err != nil {
		b.Fatal(err)
	}
	return kv
}

// parallel runs body with `callers` goroutines (1 = the benchmark's own).
func parallel(b *testing.B, callers int, body func(i int64) error) {
	var next atomic.Int64
	if callers == 1 {
		for i := 0; i < b.N; i++ {
			if err := body(int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism((callers + testingProcs() - 1) / testingProcs())
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := body(next.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

var record = []byte(`{"v":1,"state":"in_progress","owner":"0193b1d2-0000-7000-8000-000000000000","lease_until":"2026-11-21T23:59:59Z","fingerprint":"4d2b7f1e9c0a3e5b6d8f1a2c4e6b8d0f","created_at":"2026-11-21T23:59:29Z","updated_at":"2026-11-21T23:59:29Z"}`)

// kvClaimRaw is the raw baseline of a claim+complete: Create, then a
// revision-CAS Update, with records of the same size as jetretry's.
func kvClaimRaw(callers int) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		e := mustEnv(b)
		kv := bucket(b, e)
		ctx := context.Background()
		b.ResetTimer()
		parallel(b, callers, func(i int64) error {
			key := "k" + strconv.FormatInt(i, 10)
			rev, err := kv.Create(ctx, key, record)
			if err != nil {
				return err
			}
			_, err = kv.Update(ctx, key, record, rev)
			return err
		})
	}
}

func kvManager(b *testing.B, e *natsEnv, cfg idempotency.KVConfig) *retry.Manager {
	b.Helper()
	cfg.Bucket = "BENCH_" + strconv.FormatInt(seq.Add(1), 10)
	store, err := idempotency.NewKV(context.Background(), e.js, cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := retry.NewManager(retry.WithStore(store), retry.WithDefaultPolicy(zeroPolicy()))
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// kvClaimJetretry: an idempotent Do on a new key: claim, run, complete.
func kvClaimJetretry(callers int) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		m := kvManager(b, mustEnv(b), idempotency.KVConfig{})
		ctx := context.Background()
		b.ResetTimer()
		parallel(b, callers, func(i int64) error {
			_, err := retry.Do(ctx, m, category, "op", succeedCtx,
				retry.WithIdempotencyKey("k"+strconv.FormatInt(i, 10)))
			return err
		})
	}
}

const hitKeys = 1000

func kvHitRaw(b *testing.B) {
	b.ReportAllocs()
	e := mustEnv(b)
	kv := bucket(b, e)
	ctx := context.Background()
	// Filled as an idempotency bucket is: each key created, then updated
	// once (claim, complete), so that both cases read the same kind of
	// stream (a superseded revision per key).
	for i := 0; i < hitKeys; i++ {
		rev, err := kv.Create(ctx, "k"+strconv.Itoa(i), record)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := kv.Update(ctx, "k"+strconv.Itoa(i), record, rev); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := kv.Get(ctx, "k"+strconv.Itoa(i%hitKeys)); err != nil {
			b.Fatal(err)
		}
	}
}

// kvHitJetretry: an idempotent Do whose key completed earlier: the cached
// result is returned, the function does not run.
func kvHitJetretry(mode idempotency.ClaimMode) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		m := kvManager(b, mustEnv(b), idempotency.KVConfig{Claim: mode})
		ctx := context.Background()
		for i := 0; i < hitKeys; i++ {
			if _, err := retry.Do(ctx, m, category, "op", succeedCtx, retry.WithIdempotencyKey("k"+strconv.Itoa(i))); err != nil {
				b.Fatal(err)
			}
		}
		ran := 0
		fn := func(context.Context) (int, error) { ran++; return 0, nil }
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			v, err := retry.Do(ctx, m, category, "op", fn, retry.WithIdempotencyKey("k"+strconv.Itoa(i%hitKeys)))
			if err != nil {
				b.Fatal(err)
			}
			sink += v
		}
		b.StopTimer()
		if ran != 0 {
			b.Fatalf("a hit ran the function %d times", ran)
		}
	}
}

func auditStream(b *testing.B, e *natsEnv) (string, jetstream.Stream) {
	b.Helper()
	n := strconv.FormatInt(seq.Add(1), 10)
	cfg := audit.StreamConfig{Name: "BENCH_AUDIT_" + n, SubjectPrefix: "bench" + n + ".audit"}
	st, err := audit.EnsureStream(context.Background(), e.js, cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cfg.SubjectPrefix, st
}

func benchEvent(i int) audit.Event {
	return audit.Event{
		Type: audit.TypeRetryAttempt, Category: "RETRY_NATS_PUBLISH", Operation: "Publish to orders.created",
		AttemptNumber: 1, MaxAttempts: 3, DelaySeconds: 0.52, ExceptionType: "nats.ErrTimeout",
		ExceptionMessage: "nats: timeout", TenantID: "tenant-123", CorrelationID: "corr-" + strconv.Itoa(i),
		SpanID: "00f067aa0ba902b7", Timestamp: time.Now().UTC(), EventID: audit.NewEventID(),
		SchemaVersion: audit.SchemaVersion,
	}
}

// checkCount fails the benchmark unless the stream holds exactly want
// messages: nothing lost, nothing duplicated.
func checkCount(b *testing.B, st jetstream.Stream, want uint64) {
	b.Helper()
	info, err := st.Info(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if info.State.Msgs != want {
		b.Fatalf("stream holds %d events, want %d", info.State.Msgs, want)
	}
}

// auditRaw is the raw baseline: encode the event and PublishAsync it with
// its Nats-Msg-Id, then wait for every ack.
func auditRaw(b *testing.B) {
	b.ReportAllocs()
	e := mustEnv(b)
	prefix, st := auditStream(b, e)
	ctx := context.Background()
	buf := make([]byte, 0, 1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ev := benchEvent(i)
		buf = ev.AppendJSON(buf[:0])
		msg := &nats.Msg{Subject: audit.Subject(prefix, ev), Data: append([]byte(nil), buf...), Header: nats.Header{}}
		msg.Header.Set(jetstream.MsgIDHeader, ev.EventID)
		if _, err := e.js.PublishMsgAsync(msg); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-ctx.Done():
	case <-time.After(time.Minute):
		b.Fatal("acks did not arrive")
	}
	b.StopTimer()
	checkCount(b, st, uint64(b.N))
}

// auditJetretry: Emit each event to the Publisher, then Flush (every event
// acked by the stream).
func auditJetretry(b *testing.B) {
	b.ReportAllocs()
	e := mustEnv(b)
	prefix, st := auditStream(b, e)
	dir, err := os.MkdirTemp("", "jetretry-spool-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p, err := audit.NewPublisher(e.js, audit.PublisherConfig{SpoolDir: dir, SubjectPrefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := p.Emit(ctx, benchEvent(i)); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := p.Close(ctx); err != nil {
		b.Fatal(err)
	}
	checkCount(b, st, uint64(b.N))
	auditSpooled.Add(int64(p.Stats().Spooled))
}

// auditSpooled counts the events the AuditEmit runs had to spool because
// Emit outpaced publishing and the buffer was full. They were published
// from the spool before Flush returned, so they are in the timing.
var auditSpooled atomic.Int64

// AuditSpooled returns auditSpooled.
func AuditSpooled() int64 { return auditSpooled.Load() }

func testingProcs() int { return runtime.GOMAXPROCS(0) }
