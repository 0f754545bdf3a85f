# jetretry: the README's commands.
GO ?= go

.PHONY: test bench demo check fmt vet

# Every test, integration tests against an embedded nats-server included,
# with the race detector; then the bench module vets and runs its checks
# (each peer really retries), without running the benchmarks.
test: check
	$(GO) test -race -count=1 ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...

# gofmt and go vet must be clean.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Benchmarks against peers and raw baselines, printed as ratios.
bench:
	cd bench && $(GO) run ./cmd/compare

demo:
	$(GO) run ./cmd/jetretry demo
