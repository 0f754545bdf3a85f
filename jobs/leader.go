package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// On a replicated bucket, record reads are direct gets, which any
// up-to-date replica may answer: a follower that has not yet applied a
// write the leader acknowledged a moment ago answers with the record
// before it. The claim's compare-and-set makes such a read harmless on the
// way to a run, but not a decision that writes nothing: a dispatch that
// does not match the record's token is dropped as stale. A requeue's
// dispatch read against the record before the requeue would be dropped
// and strand the job. Those decisions are therefore confirmed with a read
// of the stream's leader (the stream message-get API), which is rare: it
// only happens for dispatches that look stale.

// leaderRead describes the leader reads of a bucket: nil on a single
// replica, where every read is the leader's.
type leaderRead struct {
	subject string // "<api prefix>STREAM.MSG.GET.KV_<bucket>"
	keyPre  string // "$KV.<bucket>."
}

// newLeaderRead returns the leader reads of kv, whose stream is sc, on
// js, or nil when the bucket has one replica.
func newLeaderRead(js jetstream.JetStream, kv jetstream.KeyValue, sc jetstream.StreamConfig) *leaderRead {
	if sc.Replicas <= 1 {
		return nil
	}
	return &leaderRead{
		subject: apiPrefix(js.Options()) + "STREAM.MSG.GET." + sc.Name,
		keyPre:  "$KV." + kv.Bucket() + ".",
	}
}

// apiPrefix is the JetStream API prefix js uses, ending in a dot.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// getFromLeader reads id's record as the bucket's leader has it. On a
// single replica it is get.
func (c *Client) getFromLeader(ctx context.Context, id string) (Record, uint64, error) {
	if c.leader == nil {
		return c.get(ctx, id)
	}
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{c.leader.keyPre + id})
	ctx, cancel := boundedContext(ctx, opTimeout)
	defer cancel()
	r, err := c.js.Conn().RequestWithContext(ctx, c.leader.subject, req)
	if err != nil {
		return Record{}, 0, opErr(ctx, "get", id, err)
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs"`
			Data     []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(r.Data, &resp); err != nil {
		return Record{}, 0, opErr(ctx, "get", id, fmt.Errorf("%w: %w", jetstream.ErrInvalidJetStreamResponse, err))
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return Record{}, 0, fmt.Errorf("%w: id %s", ErrNotFound, id)
	case resp.Error != nil:
		return Record{}, 0, opErr(ctx, "get", id, resp.Error)
	case resp.Message == nil:
		return Record{}, 0, opErr(ctx, "get", id, jetstream.ErrInvalidJetStreamResponse)
	}
	if len(resp.Message.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return Record{}, 0, opErr(ctx, "get", id, err)
		}
		if isMarker(h) {
			return Record{}, 0, fmt.Errorf("%w: id %s", ErrNotFound, id)
		}
	}
	rec, err := decodeRecord(id, resp.Message.Sequence, resp.Message.Data)
	return rec, resp.Message.Sequence, err
}
