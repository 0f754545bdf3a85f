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
