package idempotency_test

import (
	"fmt"

	"github.com/jetretry/jetretry/idempotency"
)

func ExampleKey() {
	key, err := idempotency.Key("kill_switch_update", "tenant-123", "corr-456",
		map[string]any{"switch_name": "all_execution"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(key)
	// Output:
	// b4b6cd7399901d2f626be7417c244b3b5696478ff091bb108dbad2a55a2f0578
}

func ExampleCanonical() {
	canon, err := idempotency.Canonical("kill_switch_update", "tenant-123", "corr-456",
		map[string]any{"switch_name": "all_execution"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(canon))
	// Output:
	// {"additional_params":{"switch_name":"all_execution"},"correlation_id":"corr-456","operation":"kill_switch_update","tenant_id":"tenant-123"}
}

func ExampleFingerprint() {
	a, _ := idempotency.Fingerprint(map[string]any{"amount": 10.5, "currency": "EUR"})
	b, _ := idempotency.Fingerprint(map[string]any{"currency": "EUR", "amount": 10.50})
	fmt.Println(a == b)
	// Output:
	// true
}
