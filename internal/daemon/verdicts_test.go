package daemon

import (
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// gatedSource is a sinks' Source whose AoR, while closed is set, waits
// until closed is closed: a reload that holds the sinks' lock for as
// long as the test wants.
type gatedSource struct {
	mu      sync.Mutex
	status  qualify.Status
	closed  chan struct{} // nil: open
	entered chan struct{} // closed when a read waits at the gate
}

func (s *gatedSource) AoR(name string) (engine.AoRSnapshot, bool) {
	s.mu.Lock()
	closed, entered, st := s.closed, s.entered, s.status
	s.entered = nil
	s.mu.Unlock()
	if closed != nil {
		if entered != nil {
			close(entered)
		}
		<-closed
	}
	return engine.AoRSnapshot{Name: name, Contacts: []engine.ContactSnapshot{{AoR: name, URI: "sip:" + name + "@192.0.2.1", Status: st}}}, true
}

// set changes the contacts' status.
func (s *gatedSource) set(st qualify.Status) { s.mu.Lock(); s.status = st; s.mu.Unlock() }

// close makes the next reads wait until the returned function opens the
// gate; entered is closed when the first of them waits.
func (s *gatedSource) close() (entered <-chan struct{}, open func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.entered = make(chan struct{}), make(chan struct{})
	closed := s.closed
	return s.entered, func() {
		s.mu.Lock()
		s.closed = nil
		s.mu.Unlock()
		close(closed)
	}
}

// verdictConf is n AoRs t0..tn-1, qualified, and a webhook sink of them.
func verdictConf(n int) *pjsip.Config {
	c := &pjsip.Config{Sinks: []*pjsip.Sink{{Name: "hook", Driver: "webhook", URL: "http://192.0.2.1/hook", Timeout: time.Second}}}
	on := &qualify.Policy{Frequency: time.Minute}
	for i := range n {
		name := fmt.Sprintf("t%d", i)
		c.AoRs = append(c.AoRs, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{"sip:" + name + "@192.0.2.1"}, Policy: on}})
	}
	return c
}

// verdictNode is a node with only what the Verdict hook and feedVerdicts
// use: the sinks on src, and a log.
func verdictNode(t testing.TB, src sink.Source) *node {
	log, err := NewLog(io.Discard, "text", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close(time.Second) })
	return &node{d: &Daemon{sinks: sink.NewGroup(sink.Config{Source: src}), log: log}, changed: newAORQueue()}
}

// TestVerdictHookNeverWaitsForTheSinks: while a reload holds the sinks'
// lock, the Verdict hook returns; the AoR it queued is recomputed by
// feedVerdicts' next step.
func TestVerdictHookNeverWaitsForTheSinks(t *testing.T) {
	src := &gatedSource{}
	n := verdictNode(t, src)
	n.d.sinks.Configure(verdictConf(1))

	entered, open := src.close()
	reloaded := make(chan struct{})
	go func() { n.d.sinks.Configure(verdictConf(1)); close(reloaded) }()
	<-entered // the reload holds the sinks' lock until open
	returned := make(chan struct{})
	go func() {
		n.verdict(cluster.Verdict{Contact: ContactKey("t0", "sip:t0@192.0.2.1"), Status: qualify.Reachable})
		close(returned)
	}()
	select {
	case <-returned:
	case <-reloaded:
		t.Fatal("the reload ended before the gate opened")
	case <-time.After(time.Minute): // only a failure waits: a hook that returns never does
		open()
		t.Fatal("the Verdict hook waited for the sinks' lock")
	}
	open()
	<-reloaded
	if up := wantUp(n.d.sinks); up != 0 {
		t.Fatalf("%d contacts wanted up before the status changed", up)
	}
	src.set(qualify.Reachable) // as the cluster's status is when the sinks read it
	n.feedQueued()             // feedVerdicts' step, woken by the hook
	if up := wantUp(n.d.sinks); up != 1 {
		t.Fatalf("%d contacts wanted up after feedVerdicts' step, want the verdict's", up)
	}
}

// wantUp counts the contacts the sink hook wants up.
func wantUp(g *sink.Group) int {
	_, objs, _ := g.Objects("hook")
	up := 0
	for _, o := range objs {
		if o.Kind == sink.KindContact && o.Want == sink.Up {
			up++
		}
	}
	return up
}
