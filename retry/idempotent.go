package retry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/jetretry/jetretry/audit"
	"github.com/jetretry/jetretry/idempotency"
)

// errLeaseLost is the cancellation cause of a call whose claim was lost.
var errLeaseLost = fmt.Errorf("retry: %w", idempotency.ErrLeaseLost)

// storeTimeout bounds the store writes that end a call (complete, release),
// which run even when the caller's context has ended.
const storeTimeout = 10 * time.Second

// doIdempotent runs the call under its idempotency key: claim, run with
// retries while renewing the lease, then record the result or release the
// claim.
func doIdempotent[T any](r *runner, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	m, c := r.m, r.c
	if m.store == nil {
		if c.failOpen {
			return loop(r, fn)
		}
		return zero, fmt.Errorf("retry: %w: the manager has no idempotency store", idempotency.ErrUnavailable)
	}
	fp := c.fingerprint
	if fp == "" {
		fp = m.defaultFingerprint(r.cat, r.op)
	}
	claim, err := m.store.Claim(r.ctx, c.key, fp, m.lease)
	if err != nil && c.waitResult && errors.Is(err, idempotency.ErrInProgress) {
		if w, ok := m.store.(idempotency.Waiter); ok {
			claim, err = waitForResult(r, w, fp, err)
		}
	}
	if err != nil {
		switch {
		case errors.Is(err, idempotency.ErrInProgress), errors.Is(err, idempotency.ErrKeyReuse),
			errors.Is(err, idempotency.ErrInvalidKey), errors.Is(err, idempotency.ErrCorrupt),
			r.ctx.Err() != nil:
			return zero, err
		case c.failOpen:
			m.logger.Warn("jetretry: idempotency store unavailable, running without protection (fail-open)",
				"retry_category", r.cat, "operation", r.op, "idempotency_key", c.key, "error", err)
			return loop(r, fn)
		case errors.Is(err, idempotency.ErrUnavailable):
			return zero, err
		}
		return zero, fmt.Errorf("retry: %w: %w", idempotency.ErrUnavailable, err)
	}
	switch claim.Status {
	case idempotency.Completed:
		var v T
		if err := json.Unmarshal(claim.Result, &v); err != nil {
			return zero, fmt.Errorf("retry: idempotency key %s: cached result does not decode into %T: %w", c.key, v, err)
		}
		r.idempotencyEvent(audit.ActionHit, nil)
		return v, nil
	case idempotency.Failed:
		return zero, fmt.Errorf("retry: %w: key %s: %s", idempotency.ErrFailed, c.key, claim.Failure)
	case idempotency.TakenOver:
		r.idempotencyEvent(audit.ActionTakeover, map[string]any{"previous_owner": claim.PreviousOwner, "owner": claim.Owner})
	}

	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	outer := r.ctx
	r.ctx = ctx
	ka := &keepAlive{claim: claim, done: make(chan struct{}), exited: make(chan struct{})}
	go ka.run(ctx, m, cancel)
	v, err := loop(r, fn)
	close(ka.done)
	<-ka.exited
	r.ctx = outer
	claim = ka.claim

	wctx, wcancel := context.WithTimeout(context.WithoutCancel(outer), storeTimeout)
	defer wcancel()
	if err != nil {
		var rerr error
		if c.rememberFail {
			rerr = m.store.Fail(wctx, claim, audit.TruncateMessage(err.Error()))
		} else {
			rerr = m.store.Release(wctx, claim)
		}
		if rerr != nil {
			m.logger.Warn("jetretry: could not end idempotency claim; it expires with its lease",
				"idempotency_key", c.key, "error", rerr)
		}
		return zero, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		if rerr := m.store.Release(wctx, claim); rerr != nil {
			m.logger.Warn("jetretry: could not release idempotency claim", "idempotency_key", c.key, "error", rerr)
		}
		return v, fmt.Errorf("retry: %w: encode result: %w", idempotency.ErrNotRecorded, err)
	}
	if err := m.store.Complete(wctx, claim, b); err != nil {
		if errors.Is(err, idempotency.ErrResultTooLarge) {
			// Nothing was written: free the key rather than leave it
			// blocked until the lease ends.
			if rerr := m.store.Release(wctx, claim); rerr != nil {
				m.logger.Warn("jetretry: could not release idempotency claim", "idempotency_key", c.key, "error", rerr)
			}
		}
		return v, fmt.Errorf("retry: %w: %w", idempotency.ErrNotRecorded, err)
	}
	r.idempotencyEvent(audit.ActionRecord, nil)
	return v, nil
}

// maxWaitRounds bounds how many times a call that waits for another
// owner's result (WaitForResult) claims the key again after the owner
// released it or its lease ended, and loses it to yet another caller.
const maxWaitRounds = 8

// waitForResult waits while another owner runs the call's key, for its
// result or for the key to be free again, which it then claims. inProgress
// is the error of the claim that found the owner.
func waitForResult(r *runner, w idempotency.Waiter, fp string, inProgress error) (idempotency.Claim, error) {
	m, key := r.m, r.c.key
	for range maxWaitRounds {
		done, err := w.Wait(r.ctx, key, fp)
		switch {
		case err == nil:
			return done, nil
		case errors.Is(err, idempotency.ErrNotFound), errors.Is(err, idempotency.ErrClaimExpired):
			// Released, cleared or orphaned: claim it.
		case r.ctx.Err() != nil:
			return idempotency.Claim{}, fmt.Errorf("retry: waiting for the result of key %s: %w: %w", key, inProgress, err)
		default:
			return idempotency.Claim{}, err
		}
		c, err := m.store.Claim(r.ctx, key, fp, m.lease)
		if !errors.Is(err, idempotency.ErrInProgress) {
			return c, err
		}
		inProgress = err
	}
	return idempotency.Claim{}, inProgress
}

// idempotencyEvent emits an idempotency event and counts it.
func (r *runner) idempotencyEvent(action audit.Action, extra map[string]any) {
	r.tel.countIdempotency(r.ctx, r.cat, string(action))
	if r.span != nil {
		r.span.AddEvent("idempotency", trace.WithAttributes(attrAction.String(string(action))))
	}
	if r.m.emitter == nil {
		return
	}
	e := r.event(audit.TypeIdempotency, r.m.clock.Now())
	e.IdempotencyKey = r.c.key
	e.Action = action
	if len(extra) > 0 {
		merged := make(map[string]any, len(e.AdditionalContext)+len(extra))
		for k, v := range e.AdditionalContext {
			merged[k] = v
		}
		for k, v := range extra {
			merged[k] = v
		}
		e.AdditionalContext = merged
	}
	r.emit(e)
}

// keepAlive renews an idempotency claim every third of the lease until
// done is closed. If the claim is lost it cancels the call, so no further
// attempt starts.
type keepAlive struct {
	claim  idempotency.Claim // owned by run until exited is closed
	done   chan struct{}
	exited chan struct{}
}

func (k *keepAlive) run(ctx context.Context, m *Manager, cancel context.CancelCauseFunc) {
	defer close(k.exited)
	interval := m.lease / 3
	for {
		t := m.clock.NewTimer(interval)
		select {
		case <-k.done:
			t.Stop()
			return
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), interval)
		c := k.claim
		err := m.store.Renew(rctx, &c, m.lease)
		rcancel()
		switch {
		case err == nil:
			k.claim = c
		case errors.Is(err, idempotency.ErrLeaseLost):
			cancel(errLeaseLost)
			return
		default:
			// The lease may still be valid: try again next tick.
			m.logger.Warn("jetretry: idempotency lease renewal failed", "idempotency_key", c.Key, "error", err)
		}
	}
}

// fpKey identifies a default fingerprint.
type fpKey struct {
	cat Category
	op  string
}

// maxCachedFingerprints bounds the default-fingerprint cache; past it,
// fingerprints are computed every time.
const maxCachedFingerprints = 4096

// defaultFingerprint is the fingerprint of calls without WithFingerprint:
// the SHA-256 of category and operation, cached per pair.
func (m *Manager) defaultFingerprint(cat Category, op string) string {
	k := fpKey{cat, op}
	m.fpMu.RLock()
	fp, ok := m.fps[k]
	m.fpMu.RUnlock()
	if ok {
		return fp
	}
	sum := sha256.Sum256([]byte(string(cat) + "\x00" + op))
	fp = hex.EncodeToString(sum[:])
	m.fpMu.Lock()
	if m.fps == nil {
		m.fps = make(map[fpKey]string)
	}
	if len(m.fps) < maxCachedFingerprints {
		m.fps[k] = fp
	}
	m.fpMu.Unlock()
	return fp
}
