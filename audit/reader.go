package audit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrUndecodable is matched by a *DecodeError.
var ErrUndecodable = errors.New("audit: undecodable messages")

// DecodeError reports messages of the audit stream that were skipped
// because they are not valid events: their data does not decode with
// Event.UnmarshalJSON, or the event fails Event.Validate. Such messages
// can only come from another publisher on the stream's subjects. It
// matches ErrUndecodable, and unwraps to the first message's error.
type DecodeError struct {
	Count    int    // messages skipped
	FirstSeq uint64 // stream sequence of the first one
	First    error  // why the first one was skipped
}

// Error implements error.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("audit: %d undecodable messages skipped (first at stream sequence %d: %v)",
		e.Count, e.FirstSeq, e.First)
}

// Is reports whether target is ErrUndecodable.
func (e *DecodeError) Is(target error) bool { return target == ErrUndecodable }

// Unwrap returns the first message's error.
func (e *DecodeError) Unwrap() error { return e.First }

func (e *DecodeError) add(seq uint64, err error) {
	if e.Count == 0 {
		e.FirstSeq, e.First = seq, err
	}
	e.Count++
}

// Filter selects audit events. The zero Filter matches every event; each
// set field narrows the selection, and all must match.
type Filter struct {
	// Types keeps events whose event_type is one of these.
	Types []Type
	// Categories keeps events whose retry_category is one of these.
	Categories []string
	// TenantID and CorrelationID keep events with exactly these values.
	TenantID, CorrelationID string
	// Since keeps events whose timestamp is at or after it, and Until
	// those strictly before it.
	//
	// Since also starts the read: the consumer starts at the stream time
	// Since minus one minute. An event is stored after it was made (later
	// still when it was spooled), so this skips none unless the
	// producer's clock ran more than a minute ahead of the server's.
	Since, Until time.Time
}

// Match reports whether e passes every condition of f.
func (f Filter) Match(e Event) bool {
	switch {
	case len(f.Types) > 0 && !slices.Contains(f.Types, e.Type),
		len(f.Categories) > 0 && !slices.Contains(f.Categories, e.Category),
		f.TenantID != "" && e.TenantID != f.TenantID,
		f.CorrelationID != "" && e.CorrelationID != f.CorrelationID,
		!f.Since.IsZero() && e.Timestamp.Before(f.Since),
		!f.Until.IsZero() && !e.Timestamp.Before(f.Until):
		return false
	}
	return true
}

// subjects returns the filter subjects for f's types and categories: their
// cross product through FilterSubject, without repeats.
func (f Filter) subjects(prefix string) []string {
	types, cats := f.Types, f.Categories
	if len(types) == 0 {
		types = []Type{""}
	}
	if len(cats) == 0 {
		cats = []string{""}
	}
	out := make([]string, 0, len(types)*len(cats))
	for _, t := range types {
		for _, c := range cats {
			if s := FilterSubject(prefix, t, c); !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// startSlack is how far before Filter.Since reads start; see Filter.Since.
const startSlack = time.Minute

// queryIdle is how long Query waits for a message before it asks the
// server whether any is still to come.
const queryIdle = 2 * time.Second

// Query returns the events of the audit stream described by cfg that match
// f, in stream order. It reads with an ordered consumer filtered on the
// subjects of f's types and categories (see FilterSubject), starting at
// f.Since when set, and stops at the stream's last message at the time of
// the call, so it returns even while events keep arriving. The other
// conditions of f are checked on the decoded events.
//
// Messages that are not valid events are skipped: Query then returns the
// events it could decode together with a *DecodeError (matching
// ErrUndecodable) that counts them. Other errors: ErrInvalidConfig for a
// bad cfg, the JetStream error (for example jetstream.ErrStreamNotFound)
// wrapped, or ctx's error.
func Query(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, f Filter) ([]Event, error) {
	var out []Event
	err := scan(ctx, js, cfg, f, false, func(e Event) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// Tail calls fn, in stream order, for each event that matches f and is
// appended to the audit stream after Tail started; with f.Since set it
// starts at f.Since instead (see Filter.Since), and continues with live
// events. It runs until ctx ends, returning ctx.Err() (joined with a
// *DecodeError when messages were skipped as in Query), or until fn
// returns an error, which it returns as is. It returns ErrInvalidConfig or
// a wrapped JetStream error when it cannot start.
func Tail(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, f Filter, fn func(Event) error) error {
	return scan(ctx, js, cfg, f, true, fn)
}

// scan reads the stream for Query (live false: up to the last message at
// start) and Tail (live true: until ctx ends).
func scan(ctx context.Context, js jetstream.JetStream, cfg StreamConfig, f Filter, live bool, fn func(Event) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.WithDefaults()
	st, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		return fmt.Errorf("audit: read stream %s: %w", cfg.Name, err)
	}
	var last uint64
	if !live {
		info, err := st.Info(ctx)
		if err != nil {
			return fmt.Errorf("audit: read stream %s: %w", cfg.Name, err)
		}
		if info.State.Msgs == 0 {
			return nil
		}
		last = info.State.LastSeq
	}

	occ := jetstream.OrderedConsumerConfig{
		FilterSubjects:    f.subjects(cfg.SubjectPrefix),
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: time.Minute,
	}
	if !f.Since.IsZero() {
		start := f.Since.Add(-startSlack)
		occ.DeliverPolicy, occ.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	} else if live {
		occ.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	cons, err := st.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("audit: read stream %s: %w", cfg.Name, err)
	}
	defer deleteConsumer(ctx, st, cons)
	if !live {
		if ci := cons.CachedInfo(); ci != nil && ci.NumPending == 0 {
			return nil
		}
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("audit: read stream %s: %w", cfg.Name, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()

	var derr DecodeError
	result := func(err error) error {
		switch {
		case derr.Count == 0:
			return err
		case err == nil:
			return &derr
		}
		return errors.Join(err, &derr)
	}
	for {
		opts := []jetstream.NextOpt(nil)
		if !live {
			opts = append(opts, jetstream.NextMaxWait(queryIdle))
		}
		m, err := it.Next(opts...)
		if err != nil {
			if ctx.Err() != nil {
				return result(ctx.Err())
			}
			if !live && errors.Is(err, nats.ErrTimeout) {
				// Nothing came: done if nothing is left to deliver
				// (messages can only leave the stream by age).
				ci, ierr := cons.Info(ctx)
				if ierr == nil && ci.NumPending == 0 {
					return result(nil)
				}
				continue
			}
			return result(fmt.Errorf("audit: read stream %s: %w", cfg.Name, err))
		}
		meta, err := m.Metadata()
		if err != nil {
			return result(fmt.Errorf("audit: read stream %s: %w", cfg.Name, err))
		}
		seq := meta.Sequence.Stream
		if !live && seq > last {
			return result(nil)
		}
		var e Event
		if err := e.UnmarshalJSON(m.Data()); err != nil {
			derr.add(seq, err)
		} else if err := e.Validate(); err != nil {
			derr.add(seq, err)
		} else if f.Match(e) {
			if err := fn(e); err != nil {
				return err
			}
		}
		if !live && (seq >= last || meta.NumPending == 0) {
			return result(nil)
		}
	}
}

// deleteConsumer removes the ordered consumer's current server consumer,
// best effort; InactiveThreshold removes it anyway.
func deleteConsumer(ctx context.Context, st jetstream.Stream, cons jetstream.Consumer) {
	ci := cons.CachedInfo()
	if ci == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = st.DeleteConsumer(ctx, ci.Name)
}
