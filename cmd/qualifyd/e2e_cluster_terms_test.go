package main

import (
	"syscall"
	"testing"
	"time"
)

// signal sends sig to n.
func (n *procNode) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := n.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// handOn stops the leader (SIGSTOP) until another node leads, then lets
// it go on (SIGCONT) and waits until it says it stopped leading; it
// returns the new leader.
func (l *clusterProcs) handOn(t *testing.T) *procNode {
	t.Helper()
	old := l.leader(t, nil)
	from := len(old.out.String())
	old.signal(t, syscall.SIGSTOP)
	next := l.leader(t, old)
	old.signal(t, syscall.SIGCONT)
	old.waitStamped(t, from, "cluster: this node stopped leading")
	return next
}

// TestClusterWebhookAcrossTerms: every node leads once while the trunk
// is up (each delivers up to the webhook); the last of them delivers the
// trunk down, and is killed while the receiver refuses the recovery's
// up. The next leader, which delivered up in its earlier term, delivers
// it again: the receiver ends with the trunk up, not holding the dead
// leader's down while the new leader's heartbeats vouch for it.
func TestClusterWebhookAcrossTerms(t *testing.T) {
	t.Parallel() // it waits on its peers' timers: beside the other parallel tests
	l := newClusterProcs(t)
	led := map[*procNode]bool{l.leader(t, nil): true}
	var last *procNode
	for range 12 {
		if len(led) == len(l.nodes) {
			break
		}
		last = l.handOn(t)
		led[last] = true
	}
	if len(led) != len(l.nodes) || !last.leads() {
		t.Fatalf("%d of %d nodes led after 12 hand-ons", len(led), len(l.nodes))
	}
	t.Logf("every node led once; %s leads", last.name)
	l.downByTwo(t)
	if lead := l.leader(t, nil); lead != last {
		t.Fatalf("%s leads after the trunk went down, want %s", lead.name, last.name)
	}
	l.hook.refusing(true)
	l.setDrop(false, l.nodes...)
	l.clusterSays(t, "Reachable", liveDetection+peerBound, l.nodes...)
	if p := l.hook.pushes(); p[len(p)-1] != "down" {
		t.Fatalf("the webhook received %v while it refused every body", p)
	}
	last.kill(t)
	l.hook.refusing(false)
	next := l.leader(t, last)
	beats := func() int { l.hook.mu.Lock(); defer l.hook.mu.Unlock(); return l.hook.beats }
	before := beats()
	eventually(t, peerBound, "the new leader "+next.name+" heartbeats", func() bool { return beats() > before })
	eventually(t, peerBound, "the webhook hears t up from "+next.name, func() bool {
		p := l.hook.pushes()
		return p[len(p)-1] == "up"
	})
	t.Logf("the receiver holds t up again %v after %s was killed, from %s", time.Since(last.killedAt).Round(time.Millisecond), last.name, next.name)
}
