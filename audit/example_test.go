package audit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jetretry/jetretry/audit"
)

func Example() {
	var mem audit.Memory // the zero value is ready to use

	// A retry layer reports the second failed attempt of a publish.
	err := mem.Emit(context.Background(), audit.Event{
		Type:             audit.TypeRetryAttempt,
		Category:         "RETRY_NATS_PUBLISH",
		Operation:        "Publish to exoarmur.audit.append.v1",
		AttemptNumber:    2, // the attempt that failed
		MaxAttempts:      3,
		DelaySeconds:     1.05, // the wait before attempt 3
		ExceptionType:    "TimeoutError",
		ExceptionMessage: audit.TruncateMessage("Connection timeout"),
		TenantID:         "tenant-123",
		CorrelationID:    "corr-456",
		TraceID:          "trace-789",
		Timestamp:        time.Date(2026, 1, 25, 21, 15, 0, 0, time.UTC),
		EventID:          "0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6b", // usually audit.NewEventID()
		SchemaVersion:    audit.SchemaVersion,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	for _, e := range mem.Events() {
		if err := e.Validate(); err != nil {
			fmt.Println(err)
		}
		fmt.Println(string(e.AppendJSON(nil)))
	}
	// Output:
	// {"event_type":"retry_attempt","retry_category":"RETRY_NATS_PUBLISH","operation":"Publish to exoarmur.audit.append.v1","attempt_number":2,"max_attempts":3,"delay_seconds":1.05,"exception_type":"TimeoutError","exception_message":"Connection timeout","tenant_id":"tenant-123","correlation_id":"corr-456","trace_id":"trace-789","timestamp":"2026-01-25T21:15:00Z","span_id":"","event_id":"0194a7c2-3b4d-7e5f-8a6b-1c2d3e4f5a6b","schema_version":1}
}

func ExampleEvent_Validate() {
	err := audit.Event{Type: audit.TypeIdempotency}.Validate()
	fmt.Println(err)
	// Output:
	// audit: invalid event: retry_category is required
}

func ExampleSubject() {
	e := audit.Event{Type: audit.TypeRetryAttempt, Category: "RETRY.KV>GET *"}
	fmt.Println(audit.Subject("jetretry.audit", e))
	fmt.Println(audit.FilterSubject("jetretry.audit", "", "RETRY.KV>GET *"))
	// Output:
	// jetretry.audit.retry_attempt.RETRY_KV_GET__
	// jetretry.audit.*.RETRY_KV_GET__
}

func ExampleComputeStats() {
	events := []audit.Event{
		// A call that failed once, then succeeded: one retry_attempt.
		{Type: audit.TypeRetryAttempt, Category: "RETRY_KV_GET", AttemptNumber: 1},
		// A call that failed three times: two retry_attempts and an
		// exhaustion.
		{Type: audit.TypeRetryAttempt, Category: "RETRY_KV_GET", AttemptNumber: 1},
		{Type: audit.TypeRetryAttempt, Category: "RETRY_KV_GET", AttemptNumber: 2},
		{Type: audit.TypeRetryExhausted, Category: "RETRY_KV_GET", TotalAttempts: 3},
		// Calls that succeeded at once emit nothing and are not counted.
	}
	s := audit.ComputeStats(events)["RETRY_KV_GET"]
	fmt.Printf("attempts=%d calls=%d failed=%d success=%.2f avg=%.2f\n",
		s.Attempts, s.CallsWithFailures, s.FailedCalls, s.SuccessRate, s.AvgAttempts)
	// Output:
	// attempts=3 calls=2 failed=1 success=0.50 avg=2.50
}
