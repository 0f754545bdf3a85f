// Package bench compares jetretry with other Go retry libraries:
// failsafe-go, cenkalti/backoff and avast/retry-go.
//
// It is a separate module so that the peers never enter the library's
// go.mod. The cases live in Cases, shared by the Go benchmarks in
// retry_test.go and by the compare program (cmd/compare), which runs each
// case several times and prints the medians. See README.md.
package bench
