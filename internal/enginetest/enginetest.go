// Package enginetest holds what the tests of the engine and of its users
// share: a scripted SIP peer that answers probes in whatever time the test
// runs in (virtual time inside a synctest bubble). It is imported by tests
// only.
package enginetest

import (
	"cmp"
	"context"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Reply is what the scripted peer does with one probe.
type Reply struct {
	Silent bool          // never answers: the probe times out
	After  time.Duration // answer delay, also the RTT reported
	Code   int           // final status code; 0 means 200
}

// Answer plays r for the probe of t sent now, as a blocking prober would:
// it waits r.After (t.Timeout when silent) or until ctx is done, and
// returns the Result. A silent peer's timeout carries the detail
// "no response"; a cancelled probe is a timeout without detail.
func Answer(ctx context.Context, t qualify.Target, r Reply) qualify.Result {
	sent := time.Now()
	wait := r.After
	if r.Silent {
		wait = t.Timeout
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return qualify.Result{Sent: sent, Reason: qualify.ReasonTimeout}
	case <-timer.C:
	}
	if r.Silent {
		return qualify.Result{Sent: sent, Reason: qualify.ReasonTimeout, Detail: "no response"}
	}
	return qualify.Result{Sent: sent, Code: cmp.Or(r.Code, 200), RTT: r.After}
}
