package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/categories"
)

const auditIntro = `Reads the audit stream (default JETRETRY_AUDIT, subjects jetretry.audit.>):
the retry attempts, exhaustions, idempotency decisions and manual overrides
that jetretry services record. Every subcommand filters by --type,
--category, --tenant and --correlation, and prints JSON with --json.
`

const auditTailUsage = `Usage: jetretry audit tail [filters] [--since T] [--json]

Prints audit events as they are appended to the stream, one line each,
until interrupted (Ctrl-C, which exits with status 0). With --since it
first prints the stored events from that time on. With --json each line
is one event in the stream's JSON schema (seed 002 field names).

Filters (all must match; a repeated or comma-separated flag matches any
of its values):
  --type         event_type: retry_attempt, retry_exhausted, idempotency,
                 manual_override, ...
  --category     retry_category, as a code (RETRY_KV_GET) or a seed 002
                 name (KV_GET); MANUAL selects manual overrides without one
  --tenant       tenant_id
  --correlation  correlation_id

Examples:
  jetretry audit tail
  jetretry audit tail --type retry_exhausted --category KV_GET,KV_PUT
  jetretry audit tail --tenant tenant-123 --since 10m --json | jq .operation
`

const auditQueryUsage = `Usage: jetretry audit query [filters] [--since T] [--until T] [--limit N] [--json]

Prints the stored audit events that match, oldest first, as a table. With
--json it prints JSON lines instead: one event per line in the stream's
JSON schema (seed 002 field names), as "audit tail --json" does, so the
output streams into jq or a file.

--since and --until take an RFC 3339 time (2026-01-02T15:04:05Z), a date
(2026-01-02, UTC) or a duration meaning that long ago (15m, 2h). --since
is inclusive, --until exclusive.

Filters (all must match; a repeated or comma-separated flag matches any
of its values):
  --type         event_type: retry_attempt, retry_exhausted, idempotency,
                 manual_override, ...
  --category     retry_category, as a code (RETRY_KV_GET) or a seed 002
                 name (KV_GET); MANUAL selects manual overrides without one
  --tenant       tenant_id
  --correlation  correlation_id

Examples:
  jetretry audit query --since 15m
  jetretry audit query --type retry_exhausted --since 2026-01-02 --until 2026-01-03
  jetretry audit query --correlation corr-456 --json | jq -s 'group_by(.event_type)'
  jetretry audit query --category NATS_PUBLISH --limit 20
`

const auditStatsUsage = `Usage: jetretry audit stats [filters] [--since T] [--until T] [--json]

Seed 002's retry pattern analysis, computed from the audit events that
match: per category, the failed attempts that were retried (ATTEMPTS),
the calls that gave up (EXHAUSTED), idempotency cache hits, recorded
results and orphan takeovers, the calls that failed at least once
(CALLS), the share of those that succeeded in the end (SUCCESS) and their
average number of attempts (AVG). A call that succeeds at its first
attempt records no event, so it counts nowhere.

--since and --until take an RFC 3339 time, a date (UTC) or a duration
meaning that long ago (15m). With --json it prints a JSON array with one
object per category.

Examples:
  jetretry audit stats
  jetretry audit stats --since 1h --category KV_GET,KV_PUT
  jetretry audit stats --tenant tenant-123 --json
`

// listFlag collects a repeatable flag whose values may also be
// comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// Manual overrides: operators' changes to stored state, recorded in the
// audit stream (seed 001).
const (
	// typeManualOverride is their event_type.
	typeManualOverride = audit.TypeManualOverride
	// manualCategory is the retry_category of one that names none.
	manualCategory = "MANUAL"
	// actionClear is the action of an idempotency record cleared.
	actionClear = audit.Action("clear")
)

// auditFlags are the connection, stream and filter flags of the audit
// commands.
type auditFlags struct {
	conn                connFlags
	stream, prefix      string
	types, cats         listFlag
	tenant, correlation string
	since, until        string
	asJSON              bool
}

// register adds the flags; until adds --until.
func (a *auditFlags) register(fs *flagSet, until bool) {
	a.conn.register(fs)
	fs.StringVar(&a.stream, "stream", audit.DefaultStreamName, "audit stream `name`")
	fs.StringVar(&a.prefix, "prefix", audit.DefaultSubjectPrefix, "audit subject `prefix`")
	fs.Var(&a.types, "type", "keep events whose event_type is `type` (repeatable, or comma-separated)")
	fs.Var(&a.cats, "category", "keep events of `category`, a code or a name (repeatable, or comma-separated)")
	fs.StringVar(&a.tenant, "tenant", "", "keep events with this tenant_id")
	fs.StringVar(&a.correlation, "correlation", "", "keep events with this correlation_id")
	fs.StringVar(&a.since, "since", "", "keep events at or after this `time` (RFC 3339, date, or duration ago)")
	if until {
		fs.StringVar(&a.until, "until", "", "keep events before this `time` (RFC 3339, date, or duration ago)")
	}
	fs.BoolVar(&a.asJSON, "json", false, "print JSON")
}

// streamConfig returns the audit stream config of the flags, or a usage
// error.
func (a *auditFlags) streamConfig() (audit.StreamConfig, error) {
	cfg := audit.StreamConfig{Name: a.stream, SubjectPrefix: a.prefix}
	if err := cfg.Validate(); err != nil {
		return cfg, usagef("--stream/--prefix: %v", err)
	}
	return cfg.WithDefaults(), nil
}

// filter returns the audit filter of the flags, or a usage error. Relative
// times count back from now.
func (a *auditFlags) filter(now time.Time) (audit.Filter, error) {
	var f audit.Filter
	for _, t := range a.types {
		f.Types = append(f.Types, audit.Type(t))
	}
	for _, s := range a.cats {
		c, err := parseCategory(s)
		if err != nil {
			return f, err
		}
		if !slices.Contains(f.Categories, c) {
			f.Categories = append(f.Categories, c)
		}
	}
	f.TenantID, f.CorrelationID = a.tenant, a.correlation
	var err error
	if f.Since, err = parseWhen("since", a.since, now); err != nil {
		return f, err
	}
	if f.Until, err = parseWhen("until", a.until, now); err != nil {
		return f, err
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, usagef("--since %s is not before --until %s", f.Since.Format(time.RFC3339), f.Until.Format(time.RFC3339))
	}
	return f, nil
}

// parseCategory accepts a category code, a seed 002 enum name or MANUAL.
func parseCategory(s string) (string, error) {
	if s == manualCategory {
		return s, nil
	}
	c, err := categories.Parse(s)
	if err != nil {
		return "", usagef("--category %q: not a category code (RETRY_KV_GET), name (KV_GET) or %s; see \"jetretry policies\"", s, manualCategory)
	}
	return string(c), nil
}

// parseWhen parses a --since or --until value: RFC 3339, a date, or a
// non-negative duration before now. "" is the zero time.
func parseWhen(name, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration ago (15m)", name, s)
}

// readError turns an error of reading the audit stream into a one-line
// message.
func (a *auditFlags) readError(cfg audit.StreamConfig, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("audit stream %s not found at %s (run a service, or \"jetretry demo --server URL\", first)",
			cfg.Name, a.conn.displayURL())
	}
	return a.conn.jsError("read audit stream "+cfg.Name, err)
}

// auditSetup is an audit subcommand ready to read: its parsed flags and
// its connection.
type auditSetup struct {
	cfg    audit.StreamConfig
	filter audit.Filter
	js     jetstream.JetStream
	close  func()
}

// setup checks the parsed flags and connects.
func (a *auditFlags) setup(ctx context.Context, fs *flagSet, name string) (*auditSetup, error) {
	if _, err := fs.positional(); err != nil {
		return nil, err
	}
	cfg, err := a.streamConfig()
	if err != nil {
		return nil, err
	}
	f, err := a.filter(time.Now())
	if err != nil {
		return nil, err
	}
	nc, js, err := a.conn.connect(ctx, "jetretry "+name, nil)
	if err != nil {
		return nil, err
	}
	return &auditSetup{cfg: cfg, filter: f, js: js, close: nc.Close}, nil
}

// warnDecode prints a warning for skipped messages and returns the other
// errors in err.
func warnDecode(stderr io.Writer, name string, err error) error {
	var de *audit.DecodeError
	if !errors.As(err, &de) {
		return err
	}
	fmt.Fprintf(stderr, "jetretry %s: warning: %s\n", name, oneLine(de.Error()))
	if err == error(de) {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var rest []error
		for _, e := range j.Unwrap() {
			if e != error(de) {
				rest = append(rest, e)
			}
		}
		return errors.Join(rest...)
	}
	return nil
}

func runAuditTail(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var a auditFlags
	fs := newFlags("audit tail", auditTailUsage, stdout)
	a.register(fs, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := a.setup(ctx, fs, "audit tail")
	if err != nil {
		return err
	}
	defer s.close()
	var buf []byte
	err = audit.Tail(ctx, s.js, s.cfg, s.filter, func(e audit.Event) error {
		buf = buf[:0]
		if a.asJSON {
			buf = e.AppendJSON(buf)
		} else {
			buf = appendEventLine(buf, e)
		}
		_, err := stdout.Write(append(buf, '\n'))
		return err
	})
	err = warnDecode(stderr, "audit tail", err)
	if err == nil || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil // interrupted: the normal end of a tail
	}
	return a.readError(s.cfg, err)
}

func runAuditQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var a auditFlags
	fs := newFlags("audit query", auditQueryUsage, stdout)
	a.register(fs, true)
	limit := fs.Int("limit", 0, "print only the `N` most recent matching events (0: all)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	s, err := a.setup(ctx, fs, "audit query")
	if err != nil {
		return err
	}
	defer s.close()
	events, err := audit.Query(ctx, s.js, s.cfg, s.filter)
	if err = warnDecode(stderr, "audit query", err); err != nil {
		return a.readError(s.cfg, err)
	}
	if *limit > 0 && len(events) > *limit {
		events = events[len(events)-*limit:]
	}
	if a.asJSON {
		var buf []byte
		for _, e := range events {
			buf = append(e.AppendJSON(buf), '\n')
		}
		_, err := stdout.Write(buf)
		return err
	}
	if len(events) == 0 {
		fmt.Fprintln(stderr, "jetretry audit query: no matching events")
		return nil
	}
	return writeEventTable(stdout, events)
}

func runAuditStats(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var a auditFlags
	fs := newFlags("audit stats", auditStatsUsage, stdout)
	a.register(fs, true)
	if err := parse(fs, args); err != nil {
		return err
	}
	s, err := a.setup(ctx, fs, "audit stats")
	if err != nil {
		return err
	}
	defer s.close()
	stats, err := audit.Stats(ctx, s.js, s.cfg, s.filter)
	if err = warnDecode(stderr, "audit stats", err); err != nil {
		return a.readError(s.cfg, err)
	}
	if a.asJSON {
		return writeStatsJSON(stdout, stats)
	}
	return writeStatsTable(stdout, stats)
}

// eventTime formats an event's timestamp for people: UTC, milliseconds.
func eventTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// appendEventLine appends the one-line human form of e (no newline).
func appendEventLine(dst []byte, e audit.Event) []byte {
	dst = fmt.Appendf(dst, "%s  %-15s  %-27s  %s", eventTime(e.Timestamp), e.Type, e.Category, printable(e.Operation, 80))
	if d := eventDetail(e); d != "" {
		dst = append(dst, ": "...)
		dst = append(dst, d...)
	}
	if e.TenantID != "" {
		dst = append(dst, "  tenant="...)
		dst = append(dst, printable(e.TenantID, 80)...)
	}
	if e.CorrelationID != "" {
		dst = append(dst, "  correlation="...)
		dst = append(dst, printable(e.CorrelationID, 80)...)
	}
	return dst
}

// writeEventTable prints events as a table.
func writeEventTable(w io.Writer, events []audit.Event) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tTYPE\tCATEGORY\tTENANT\tCORRELATION\tOPERATION\tDETAIL")
	for _, e := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", eventTime(e.Timestamp), cell(string(e.Type)), cell(e.Category),
			cell(e.TenantID), cell(e.CorrelationID), cell(e.Operation), eventDetail(e))
	}
	return tw.Flush()
}

// cell is s for a table cell: printable, bounded, "-" when empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s, 60)
}

// printable returns s on one line, without tabs or control characters,
// cut to at most n runes.
func printable(s string, n int) string {
	var b strings.Builder
	i := 0
	for _, r := range s {
		if i == n {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
		i++
	}
	return b.String()
}

// eventDetail describes what an event says beyond its type, category and
// operation.
func eventDetail(e audit.Event) string {
	switch e.Type {
	case audit.TypeRetryAttempt:
		return fmt.Sprintf("attempt %d/%d failed, next in %s: %s", e.AttemptNumber, e.MaxAttempts,
			seconds(e.DelaySeconds), exception(e.ExceptionType, e.ExceptionMessage))
	case audit.TypeRetryExhausted:
		reason := e.StopReason
		if reason == "" {
			reason = "exhausted"
		}
		return fmt.Sprintf("gave up after %d attempts (%s): %s", e.TotalAttempts, reason,
			exception(e.FinalExceptionType, e.FinalExceptionMessage))
	case audit.TypeIdempotency:
		return fmt.Sprintf("%s key=%s", e.Action, e.IdempotencyKey)
	}
	var parts []string
	if e.Action != "" {
		parts = append(parts, string(e.Action))
	}
	if e.IdempotencyKey != "" {
		parts = append(parts, "key="+e.IdempotencyKey)
	}
	if e.AttemptNumber != 0 {
		parts = append(parts, fmt.Sprintf("attempt=%d", e.AttemptNumber))
	}
	if e.TotalAttempts != 0 {
		parts = append(parts, fmt.Sprintf("total_attempts=%d", e.TotalAttempts))
	}
	if e.StopReason != "" {
		parts = append(parts, "stop_reason="+e.StopReason)
	}
	for _, k := range sortedKeys(e.AdditionalContext) {
		v, err := json.Marshal(e.AdditionalContext[k])
		if s, ok := e.AdditionalContext[k].(string); ok {
			v = []byte(s)
		} else if err != nil {
			continue
		}
		parts = append(parts, k+"="+printable(string(v), 60))
	}
	if msg := exception(e.ExceptionType, e.ExceptionMessage); msg != "" {
		parts = append(parts, msg)
	}
	return strings.Join(parts, " ")
}

// exception formats an exception type and message on one line.
func exception(typ, msg string) string {
	msg = printable(msg, 200)
	switch {
	case typ == "":
		return msg
	case msg == "":
		return typ
	}
	return typ + ": " + msg
}

// seconds formats a delay in seconds as a duration ("400ms", "1.5s").
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

// statsRow is one category's statistics, as printed.
type statsRow struct {
	Category           string  `json:"category"`
	Attempts           int     `json:"attempts"`
	Exhaustions        int     `json:"exhaustions"`
	IdempotencyHits    int     `json:"idempotency_hits"`
	IdempotencyRecords int     `json:"idempotency_records"`
	Takeovers          int     `json:"takeovers"`
	CallsWithFailures  int     `json:"calls_with_failures"`
	FailedCalls        int     `json:"failed_calls"`
	SuccessRate        float64 `json:"success_rate"`
	AvgAttempts        float64 `json:"avg_attempts"`
}

// statsRows returns the rows of stats: the 17 categories in seed 002's
// order, then any other category by name. Categories with nothing to
// count (only events of other types, such as manual overrides) are left
// out.
func statsRows(stats map[string]audit.CategoryStats) []statsRow {
	order := make([]string, 0, len(stats))
	for _, c := range categories.All() {
		if _, ok := stats[string(c)]; ok {
			order = append(order, string(c))
		}
	}
	for _, c := range sortedKeys(stats) {
		if !categories.Known(categories.Category(c)) {
			order = append(order, c)
		}
	}
	rows := make([]statsRow, 0, len(order))
	for _, c := range order {
		s := stats[c]
		if s.Attempts+s.Exhaustions+s.IdempotencyHits+s.IdempotencyRecords+s.Takeovers+s.CallsWithFailures == 0 {
			continue
		}
		rows = append(rows, newStatsRow(c, s))
	}
	return rows
}

// newStatsRow returns category c's statistics as printed.
func newStatsRow(c string, s audit.CategoryStats) statsRow {
	return statsRow{
		Category: c, Attempts: s.Attempts, Exhaustions: s.Exhaustions,
		IdempotencyHits: s.IdempotencyHits, IdempotencyRecords: s.IdempotencyRecords, Takeovers: s.Takeovers,
		CallsWithFailures: s.CallsWithFailures, FailedCalls: s.FailedCalls,
		SuccessRate: s.SuccessRate, AvgAttempts: s.AvgAttempts,
	}
}

// writeStatsJSON prints the stats rows as a JSON array.
func writeStatsJSON(w io.Writer, stats map[string]audit.CategoryStats) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(statsRows(stats))
}

// writeStatsTable prints the stats rows as a table, with a total row.
func writeStatsTable(w io.Writer, stats map[string]audit.CategoryStats) error {
	rows := statsRows(stats)
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no retry or idempotency events match")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CATEGORY\tATTEMPTS\tEXHAUSTED\tHITS\tRECORDS\tTAKEOVERS\tCALLS\tSUCCESS\tAVG")
	var total statsRow
	var attemptsMade float64 // sum of AvgAttempts * CallsWithFailures
	for _, r := range rows {
		writeStatsRow(tw, r)
		total.Attempts += r.Attempts
		total.Exhaustions += r.Exhaustions
		total.IdempotencyHits += r.IdempotencyHits
		total.IdempotencyRecords += r.IdempotencyRecords
		total.Takeovers += r.Takeovers
		total.CallsWithFailures += r.CallsWithFailures
		total.FailedCalls += r.FailedCalls
		attemptsMade += r.AvgAttempts * float64(r.CallsWithFailures)
	}
	if len(rows) > 1 {
		total.Category = "TOTAL"
		if n := total.CallsWithFailures; n > 0 {
			total.SuccessRate = max(0, float64(n-total.FailedCalls)/float64(n))
			total.AvgAttempts = attemptsMade / float64(n)
		}
		writeStatsRow(tw, total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, "CALLS: calls that failed at least once; SUCCESS and AVG describe them (first-try successes record no event).")
	return err
}

func writeStatsRow(w io.Writer, r statsRow) {
	success, avg := "-", "-"
	if r.CallsWithFailures > 0 {
		success = fmt.Sprintf("%.1f%%", r.SuccessRate*100)
		avg = fmt.Sprintf("%.2f", r.AvgAttempts)
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Category, r.Attempts, r.Exhaustions,
		r.IdempotencyHits, r.IdempotencyRecords, r.Takeovers, r.CallsWithFailures, success, avg)
}
