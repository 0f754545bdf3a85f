package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
)

const idempotencyGetUsage = `Usage: jetretry idempotency get KEY [--bucket B] [--json]

Prints the idempotency record stored under KEY: its state (in_progress,
completed or failed), the owner and lease of a claim in progress, the
payload fingerprint, the cached result (raw JSON) or remembered failure,
its times and its KV revision. Exits with status 1 when there is none.

Examples:
  jetretry idempotency get 3f1c...e9
  jetretry idempotency get "$(jetretry idempotency key --operation charge --tenant t1 --correlation c1)"
  jetretry idempotency get 3f1c...e9 --json | jq .result
`

const idempotencyClearUsage = `Usage: jetretry idempotency clear KEY [--bucket B] [--category C] [--reason TEXT] [--force] [--json]

Deletes the idempotency record stored under KEY, whatever its state, so
that the next call with the key runs the operation again. Use it to
release a key blocked by a corrupt record or a remembered failure, or to
force a re-run.

Every clear is audited: a manual_override event (action "clear", the key,
the operator's category, tenant, correlation and reason, and the state
the record had) is published to the audit stream, which is created if it
does not exist. A record in progress with a live lease is only cleared
with --force, since its owner may still be running the operation and a
second caller could then run it too. Exits with status 1 when there is
no record.

Examples:
  jetretry idempotency clear 3f1c...e9 --reason "charge refunded by hand"
  jetretry idempotency clear 3f1c...e9 --category EXECUTION_INTENT --tenant t1 --correlation c1
  jetretry idempotency clear 3f1c...e9 --force --json
`

// recordFlags are the flags of get and clear.
type recordFlags struct {
	conn   connFlags
	bucket string
	asJSON bool
}

func (r *recordFlags) register(fs *flagSet) {
	r.conn.register(fs)
	fs.StringVar(&r.bucket, "bucket", idempotency.DefaultKVBucket, "idempotency KV `bucket`")
	fs.BoolVar(&r.asJSON, "json", false, "print JSON")
}

// key returns the KEY argument, checked.
func (r *recordFlags) key(fs *flagSet) (string, error) {
	args, err := fs.positional("KEY")
	if err != nil {
		return "", err
	}
	if !idempotency.ValidKey(args[0]) {
		return "", usagef("%q is not a valid idempotency key (see \"jetretry idempotency key\")", args[0])
	}
	return args[0], nil
}

// open connects and opens the bucket, which must exist.
func (r *recordFlags) open(ctx context.Context, name string) (*nats.Conn, jetstream.JetStream, *idempotency.KV, error) {
	nc, js, err := r.conn.connect(ctx, "jetretry "+name, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	// NewKV creates a missing bucket: look first, so that a typo in
	// --bucket or the wrong server is reported, not papered over.
	if _, err := js.KeyValue(ctx, r.bucket); err != nil {
		nc.Close()
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, nil, nil, fmt.Errorf("idempotency bucket %s not found at %s (no service has used it yet, or see --bucket)",
				r.bucket, r.conn.displayURL())
		}
		return nil, nil, nil, r.conn.jsError("open bucket "+r.bucket, err)
	}
	kv, err := idempotency.NewKV(ctx, js, idempotency.KVConfig{Bucket: r.bucket})
	if err != nil {
		nc.Close()
		return nil, nil, nil, r.conn.jsError("open bucket "+r.bucket, err)
	}
	return nc, js, kv, nil
}

// get reads key's record, with one-line errors.
func (r *recordFlags) get(ctx context.Context, kv *idempotency.KV, key string) (idempotency.Record, error) {
	rec, err := kv.Get(ctx, key)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, idempotency.ErrNotFound):
		return rec, fmt.Errorf("no idempotency record for key %s in bucket %s", key, r.bucket)
	case errors.Is(err, idempotency.ErrCorrupt):
		return rec, err
	}
	return rec, r.conn.jsError("read key "+key, err)
}

// recordJSON is the JSON form of a record: idempotency.Record with the
// result as raw JSON and the revision.
type recordJSON struct {
	Bucket      string          `json:"bucket"`
	Key         string          `json:"key"`
	State       string          `json:"state"`
	Owner       string          `json:"owner,omitempty"`
	LeaseUntil  time.Time       `json:"lease_until,omitzero"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Failure     string          `json:"failure,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Revision    uint64          `json:"revision"`
}

func toRecordJSON(bucket string, rec idempotency.Record) recordJSON {
	j := recordJSON{
		Bucket: bucket, Key: rec.Key, State: string(rec.State), Owner: rec.Owner,
		LeaseUntil: rec.LeaseUntil.UTC(), Fingerprint: rec.Fingerprint, Failure: rec.Failure,
		CreatedAt: rec.CreatedAt.UTC(), UpdatedAt: rec.UpdatedAt.UTC(), Revision: rec.Revision,
	}
	if rec.LeaseUntil.IsZero() {
		j.LeaseUntil = time.Time{}
	}
	if len(rec.Result) > 0 {
		j.Result = json.RawMessage(rec.Result)
		if !json.Valid(rec.Result) {
			j.Result, _ = json.Marshal(string(rec.Result))
		}
	}
	return j
}

func runIdempotencyGet(ctx context.Context, args []string, stdout, _ io.Writer) error {
	var r recordFlags
	fs := newFlags("idempotency get", idempotencyGetUsage, stdout)
	r.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	key, err := r.key(fs)
	if err != nil {
		return err
	}
	nc, _, kv, err := r.open(ctx, "idempotency get")
	if err != nil {
		return err
	}
	defer nc.Close()
	rec, err := r.get(ctx, kv, key)
	if err != nil {
		var ce *idempotency.CorruptRecordError
		if errors.As(err, &ce) {
			return fmt.Errorf("the record of key %s (revision %d) is corrupt: %v; \"jetretry idempotency clear %s\" removes it",
				key, ce.Revision, ce.Err, key)
		}
		return err
	}
	j := toRecordJSON(r.bucket, rec)
	if r.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(j)
	}
	return writeRecord(stdout, j, time.Now())
}

// writeRecord prints a record for people. now tells a live lease from an
// expired one.
func writeRecord(w io.Writer, j recordJSON, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name, value string) {
		if value != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, value)
		}
	}
	row("key", j.Key)
	row("bucket", j.Bucket)
	row("state", j.State)
	row("owner", j.Owner)
	if !j.LeaseUntil.IsZero() {
		lease := j.LeaseUntil.Format(time.RFC3339Nano)
		if j.State == string(idempotency.StateInProgress) {
			if d := j.LeaseUntil.Sub(now); d > 0 {
				lease += fmt.Sprintf(" (live for %s)", d.Round(time.Second))
			} else {
				lease += " (expired: the next claim takes it over)"
			}
		}
		row("lease until", lease)
	}
	row("fingerprint", j.Fingerprint)
	row("result", printable(string(j.Result), 2000))
	row("failure", printable(j.Failure, 2000))
	row("created", j.CreatedAt.Format(time.RFC3339Nano))
	row("updated", j.UpdatedAt.Format(time.RFC3339Nano))
	row("revision", fmt.Sprint(j.Revision))
	return tw.Flush()
}

func runIdempotencyClear(ctx context.Context, args []string, stdout, _ io.Writer) error {
	var r recordFlags
	fs := newFlags("idempotency clear", idempotencyClearUsage, stdout)
	r.register(fs)
	category := fs.String("category", manualCategory, "retry_category of the audit event: a category code or name, or MANUAL")
	tenant := fs.String("tenant", "", "tenant_id of the audit event")
	corr := fs.String("correlation", "", "correlation_id of the audit event")
	reason := fs.String("reason", "", "why the record is cleared, kept in the audit event")
	force := fs.Bool("force", false, "clear a record in progress even while its lease is live")
	stream := fs.String("stream", audit.DefaultStreamName, "audit stream `name`")
	prefix := fs.String("prefix", audit.DefaultSubjectPrefix, "audit subject `prefix`")
	if err := parse(fs, args); err != nil {
		return err
	}
	key, err := r.key(fs)
	if err != nil {
		return err
	}
	cat, err := parseCategory(*category)
	if err != nil {
		return err
	}
	cfg := audit.StreamConfig{Name: *stream, SubjectPrefix: *prefix}
	if err := cfg.Validate(); err != nil {
		return usagef("--stream/--prefix: %v", err)
	}
	cfg = cfg.WithDefaults()

	nc, js, kv, err := r.open(ctx, "idempotency clear")
	if err != nil {
		return err
	}
	defer nc.Close()
	rec, err := r.get(ctx, kv, key)
	prevState := string(rec.State)
	var ce *idempotency.CorruptRecordError
	switch {
	case errors.As(err, &ce):
		prevState, rec.Revision = "corrupt", ce.Revision
	case err != nil:
		return err
	case rec.State == idempotency.StateInProgress && rec.LeaseUntil.After(time.Now()) && !*force:
		return fmt.Errorf("key %s is in progress, owned by %s until %s: its owner may still be running the operation; --force clears it anyway",
			key, rec.Owner, rec.LeaseUntil.UTC().Format(time.RFC3339))
	}

	// The audit stream must take the event: make sure of it before the
	// record goes. An existing stream is used as it is (never updated with
	// this command's defaults).
	if _, err := js.Stream(ctx, cfg.Name); errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := audit.EnsureStream(ctx, js, cfg); err != nil {
			return r.conn.jsError("create audit stream "+cfg.Name, err)
		}
	} else if err != nil {
		return r.conn.jsError("open audit stream "+cfg.Name, err)
	}

	if err := kv.Clear(ctx, key); err != nil {
		if errors.Is(err, idempotency.ErrNotFound) {
			return fmt.Errorf("no idempotency record for key %s in bucket %s (cleared meanwhile)", key, r.bucket)
		}
		return r.conn.jsError("clear key "+key, err)
	}

	e := audit.Event{
		Type: typeManualOverride, Category: cat, Operation: "idempotency clear",
		IdempotencyKey: key, Action: actionClear, TenantID: *tenant, CorrelationID: *corr,
		Timestamp: time.Now().UTC(), EventID: audit.NewEventID(), SchemaVersion: audit.SchemaVersion,
		AdditionalContext: map[string]any{
			"bucket": r.bucket, "previous_state": prevState, "previous_revision": rec.Revision,
		},
	}
	if *reason != "" {
		e.AdditionalContext["reason"] = *reason
	}
	if u := os.Getenv("USER"); u != "" {
		e.AdditionalContext["operator"] = u
	}
	data := e.AppendJSON(nil)
	msg := &nats.Msg{Subject: audit.Subject(cfg.SubjectPrefix, e), Data: data, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, e.EventID)
	ack, err := js.PublishMsg(ctx, msg)
	if err != nil {
		return r.conn.jsError(fmt.Sprintf("key %s was cleared, but its audit event %s was not published", key, e.EventID), err)
	}

	if r.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		return enc.Encode(struct {
			Cleared          bool            `json:"cleared"`
			Bucket           string          `json:"bucket"`
			Key              string          `json:"key"`
			PreviousState    string          `json:"previous_state"`
			PreviousRevision uint64          `json:"previous_revision"`
			Event            json.RawMessage `json:"event"`
			Stream           string          `json:"stream"`
			Sequence         uint64          `json:"sequence"`
		}{true, r.bucket, key, prevState, rec.Revision, data, ack.Stream, ack.Sequence})
	}
	fmt.Fprintf(stdout, "cleared key %s from bucket %s (it was %s, revision %d)\n", key, r.bucket, prevState, rec.Revision)
	_, err = fmt.Fprintf(stdout, "audited: %s event %s on %s (stream %s, sequence %d)\n",
		e.Type, e.EventID, msg.Subject, ack.Stream, ack.Sequence)
	return err
}
