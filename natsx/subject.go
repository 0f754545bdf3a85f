package natsx

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// checkSubject reports why subj cannot be used, as an error wrapping
// nats.ErrBadSubject, or nil. Subjects are dot-separated non-empty tokens
// without whitespace. With wildcards, a token may be "*", and ">" may be
// the last token; without, neither may appear (a publish goes to one
// subject).
func checkSubject(subj string, wildcards bool) error {
	bad := func(reason string) error {
		return fmt.Errorf("%w: %q %s", nats.ErrBadSubject, subj, reason)
	}
	if subj == "" {
		return bad("is empty")
	}
	if strings.ContainsAny(subj, " \t\r\n\f\v") {
		return bad("contains whitespace")
	}
	rest := subj
	for {
		tok, after, more := strings.Cut(rest, ".")
		switch {
		case tok == "":
			return bad("has an empty token")
		case (tok == "*" || tok == ">") && !wildcards:
			return bad("contains a wildcard")
		case tok == ">" && more:
			return bad(`has ">" before the last token`)
		}
		if !more {
			break
		}
		rest = after
	}
	return nil
}

// checkQueue reports why queue cannot be used as a queue group name, as
// an error wrapping nats.ErrBadQueueName, or nil.
func checkQueue(queue string) error {
	if queue == "" || strings.ContainsAny(queue, " \t\r\n\f\v") {
		return fmt.Errorf("%w: %q", nats.ErrBadQueueName, queue)
	}
	return nil
}
