package cli

import (
	"math/rand/v2"

	"github.com/jetretry/jetretry/categories"
	"github.com/jetretry/jetretry/retry"
)

// opKind is the planned outcome of one demo operation.
type opKind uint8

// The outcomes the demo injects.
const (
	// kindOK succeeds at its first attempt (and emits no audit event).
	kindOK opKind = iota
	// kindTransient fails demoOp.Failures times with a retryable error,
	// then succeeds.
	kindTransient
	// kindRateLimited fails once with a short retry-after hint, then
	// succeeds.
	kindRateLimited
	// kindPermanent fails with an error that is not retried.
	kindPermanent
	// kindExhaust fails at every attempt until the policy gives up.
	kindExhaust
	// kindDuplicate succeeds under an idempotency key and is then
	// submitted again with the same key: the second call is a cache hit.
	kindDuplicate

	numKinds
)

var kindNames = [numKinds]string{"ok", "transient", "rate_limited", "permanent", "exhaust", "duplicate"}

func (k opKind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// kindWeights are the relative frequencies of the outcomes; a category
// draws among the kinds its simulated service supports.
var kindWeights = [numKinds]int{
	kindOK:          45,
	kindTransient:   22,
	kindRateLimited: 7,
	kindPermanent:   8,
	kindExhaust:     8,
	kindDuplicate:   10,
}

// kindSet is a set of opKinds.
type kindSet uint8

func kindsOf(ks ...opKind) kindSet {
	var s kindSet
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

func (s kindSet) has(k opKind) bool { return s&(1<<k) != 0 }

// demoCapabilities says which outcomes the simulated service of each
// category can produce (see demo_services.go). Duplicates need a result
// that survives the idempotency store's JSON round trip, which a
// connection, a subscription, a stream or a bucket handle does not; a
// subscription or a core request cannot carry a retry-after hint.
var demoCapabilities = map[retry.Category]kindSet{
	categories.NATSConnect:      kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust),
	categories.NATSPublish:      kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust, kindDuplicate),
	categories.NATSSubscribe:    kindsOf(kindOK, kindTransient, kindPermanent, kindExhaust),
	categories.NATSStreamCreate: kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust),
	categories.KVCreate:         kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust),
	categories.KVGet:            kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust),
	categories.KVPut:            kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust, kindDuplicate),
	categories.KVDelete:         kindsOf(kindOK, kindTransient, kindRateLimited, kindPermanent, kindExhaust, kindDuplicate),
	categories.APIRequest:       kindsOf(kindOK, kindTransient, kindPermanent, kindExhaust),
	// The service calls wrapped in retry.Do directly support everything
	// their attempt budget allows (see supportedKinds).
	categories.ExecutionIntent:      allKinds,
	categories.ExecutionContainment: allKinds,
	categories.ExecutionExpiration:  allKinds,
	categories.ApprovalCheck:        allKinds,
	categories.ApprovalGrant:        allKinds,
	categories.ReplayProcessing:     allKinds,
	categories.ReplayValidation:     allKinds,
	categories.APIValidation:        allKinds,
}

const allKinds kindSet = 1<<numKinds - 1

// supportedKinds returns the kinds a category can be planned with: its
// service's capabilities, less the outcomes that need a second attempt
// when its policy allows only one.
func supportedKinds(c retry.Category, maxAttempts int) kindSet {
	s := demoCapabilities[c]
	if maxAttempts < 2 {
		s &^= kindsOf(kindTransient, kindRateLimited)
	}
	return s
}

// demoOp is one planned operation.
type demoOp struct {
	Seq      int
	Category retry.Category
	Kind     opKind
	// Failures is how many attempts fail before the success of a
	// kindTransient operation: 1 to MaxAttempts-1.
	Failures int
}

// planWorkload returns n operations drawn from seed; the same n and seed
// always give the same plan, and a longer plan starts with a shorter one.
//
// Operations come in rounds of 17, one per category in a shuffled order,
// so every category is exercised evenly. In the first round every
// category gets a failing or duplicate outcome, spread so that each such
// kind appears: any run of 17 operations or more leaves audit events of
// every category and of every event type. Later rounds draw outcomes by
// kindWeights.
func planWorkload(n int, seed uint64) []demoOp {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	cats := categories.All()
	defaults := categories.Defaults()
	ops := make([]demoOp, 0, n)
	for round := 0; len(ops) < n; round++ {
		r.Shuffle(len(cats), func(i, j int) { cats[i], cats[j] = cats[j], cats[i] })
		var used kindSet // showcase kinds given out in the first round
		for _, c := range cats {
			if len(ops) == n {
				break
			}
			maxAttempts := defaults[c].MaxAttempts
			can := supportedKinds(c, maxAttempts)
			var k opKind
			if round == 0 {
				k = showcaseKind(r, can, used)
				used |= kindsOf(k)
			} else {
				k = weightedKind(r, can)
			}
			op := demoOp{Seq: len(ops), Category: c, Kind: k}
			if k == kindTransient {
				op.Failures = 1 + r.IntN(maxAttempts-1)
			}
			ops = append(ops, op)
		}
	}
	return ops
}

// showcaseKind picks a kind other than kindOK from can, preferring one
// not yet in used, in a random order.
func showcaseKind(r *rand.Rand, can, used kindSet) opKind {
	order := r.Perm(int(numKinds) - 1) // kinds 1..numKinds-1
	for _, i := range order {
		if k := opKind(i + 1); can.has(k) && !used.has(k) {
			return k
		}
	}
	for _, i := range order {
		if k := opKind(i + 1); can.has(k) {
			return k
		}
	}
	return kindOK
}

// weightedKind draws a kind from can by kindWeights.
func weightedKind(r *rand.Rand, can kindSet) opKind {
	total := 0
	for k := range numKinds {
		if can.has(k) {
			total += kindWeights[k]
		}
	}
	x := r.IntN(total)
	for k := range numKinds {
		if !can.has(k) {
			continue
		}
		if x < kindWeights[k] {
			return k
		}
		x -= kindWeights[k]
	}
	return kindOK
}
