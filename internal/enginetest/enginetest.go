// Package enginetest holds what the tests of the engine and of its users
// share: a scripted SIP peer that answers probes in whatever time the test
// runs in (virtual time inside a synctest bubble). It is imported by tests
// only.
package enginetest

import (
	"cmp"
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Reply is what the scripted peer does with one probe.
type Reply struct {
	Silent bool          // never answers: the probe times out
	After  time.Duration // answer delay, also the RTT reported
	Code   int           // final status code; 0 means 200
	// RetryAfter is the response's Retry-After, kept with a 503 only.
	RetryAfter time.Duration
}

// Start plays r for the probe of t sent now, as an engine's prober does
// (engine.Prober's Start): it returns at once, and a goroutine of its own
// calls done with tag and the Result r.After later (t.Timeout when
// silent), or as soon as ctx is done. A silent peer's timeout carries the
// detail "no response"; a cancelled probe is a timeout without detail.
func Start(ctx context.Context, t probe.Target, r Reply, tag uint64, done func(uint64, qualify.Result)) {
	sent := time.Now()
	go func() { done(tag, answer(ctx, t, r, sent)) }()
}

// answer waits for the outcome of r for the probe of t sent at sent.
func answer(ctx context.Context, t probe.Target, r Reply, sent time.Time) qualify.Result {
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
	res := qualify.Result{Sent: sent, Code: cmp.Or(r.Code, 200), RTT: r.After}
	if res.Code == 503 {
		res.RetryAfter = r.RetryAfter
	}
	return res
}

// NumberedAoRs returns n AoRs of one contact each, sip:cI@127.0.0.1:40000
// named after it, with policy p: the million-contact tables of the
// engine's and the API's benchmarks.
func NumberedAoRs(n int, p qualify.Policy) []probe.AoR {
	aors := make([]probe.AoR, n)
	for i := range aors {
		u := fmt.Sprintf("sip:c%d@127.0.0.1:40000", i)
		aors[i] = probe.AoR{Name: u[4:], Contacts: []string{u}, Policy: &p}
	}
	return aors
}

// WatchLock starts a stand-in for the engine's scheduler, which calls
// lock (a call that takes the engine's lock, such as Summary) every
// millisecond, then each, if not nil. The returned stop ends it and
// returns the longest lock took: how long a listing or a reload kept the
// probes from starting.
func WatchLock(lock, each func()) (stop func() time.Duration) {
	done, longest := make(chan struct{}), make(chan time.Duration)
	go func() {
		var most time.Duration
		for {
			select {
			case <-done:
				longest <- most
				return
			case <-time.After(time.Millisecond):
			}
			t0 := time.Now()
			lock()
			most = max(most, time.Since(t0))
			if each != nil {
				each()
			}
		}
	}()
	return func() time.Duration {
		close(done)
		return <-longest
	}
}

// StepWall returns t with its wall clock reading moved by d and its
// monotonic reading kept: what time.Now returns after the system clock
// was stepped by d (NTP step at boot, an operator's date -s, VM resume).
func StepWall(t time.Time, d time.Duration) time.Time {
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	mono := (*layout)(unsafe.Pointer(&t)).ext
	u := t.Add(d)
	(*layout)(unsafe.Pointer(&u)).ext = mono
	return u
}
