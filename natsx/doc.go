// Package natsx runs NATS operations (connect, publish, request,
// subscribe, JetStream publish and stream creation) under retry.Do, each
// in its seed 002 retry category, so that their retries are bounded,
// classified and audited.
//
//	nc, err := natsx.Connect(ctx, mgr, natsx.ConnectConfig{CredsFile: "app.creds"})
//	c, err := natsx.New(nc, mgr)
//	err = c.Publish(ctx, "orders.created", data, retry.WithTenant("t1"))
//
// # Categories
//
//	Connect                     RETRY_NATS_CONNECT
//	Publish, PublishMsg         RETRY_NATS_PUBLISH
//	JetStreamPublish(Msg)       RETRY_NATS_PUBLISH
//	Request, RequestMsg         RETRY_API_REQUEST (seed 002 has no request category)
//	Subscribe, QueueSubscribe   RETRY_NATS_SUBSCRIBE
//	CreateStream                RETRY_NATS_STREAM_CREATE
//
// # Classification
//
// Classify decides, for errors from nats.go and its jetstream package,
// what retry.Do should do: transient errors (timeouts, no responders,
// reconnects, a server not up yet, JetStream 503s and cluster
// unavailability) are left retryable; errors that no retry can fix
// (authorization, permission violations, bad subjects, payload too large,
// certificate errors, invalid stream configs, a closed connection) are
// marked retry.Permanent. Every error is wrapped in an *Error that names
// it for audit events ("nats.ErrTimeout", "jetstream.APIError(10058)").
// Package kvx applies the same rules.
//
// # What a retry means
//
// Each operation documents what its retry repeats. In short: a core
// publish never hands a message to the connection twice; a JetStream
// publish carries one Nats-Msg-Id across its attempts, so the stream
// deduplicates a retry after a lost ack; a request is sent again (make
// the responder idempotent, or pass retry.NotIdempotent); a subscription
// is made once and confirmed with a flush; a stream is created or updated
// to the same config, which is idempotent.
//
// Invalid arguments (an empty subject, wildcards in a publish subject, a
// nil message) and bad connection config fail at once, without an attempt
// or an audit event, with a permanent error.
package natsx
