package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestFullStoreLeavesTheCluster: the leader's store fills up and its
// embedded server disables its JetStream, as NATS does on a write that
// finds no space. The node gives the lease up and says it is out of the
// cluster with the reason; the others see its membership lapse (its
// votes stop counting) and one of them leads. Once the store has room
// again, the node enables its JetStream and rejoins.
func TestFullStoreLeavesTheCluster(t *testing.T) {
	nodes := startCluster(t, 3, Majority)
	full := oneLeader(t, nodes)
	rest := others(nodes, full)
	full.c.mu.Lock()
	full.c.free = func(string) (uint64, error) { return 0, nil }
	full.c.mu.Unlock()
	disabled := time.Now()
	if err := full.c.server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	out := waitFor(t, 4*testTTL, full.cfg.Self+" gives the lease up and says it cannot store", func() bool {
		v := full.c.View()
		return !v.Leading && !v.InCluster && v.Store != "" && full.c.Vouch() != nil
	})
	t.Logf("%s out of the cluster %v after its JetStream was disabled: %s", full.cfg.Self, out, full.c.View().Store)
	waitFor(t, 10*testTTL, "the others count it out and one of them leads", func() bool {
		for _, n := range rest {
			for _, m := range n.c.View().Members {
				if m.Name == full.cfg.Self && m.Up {
					return false
				}
			}
		}
		return len(leaders(rest)) == 1
	})
	t.Logf("%s leads, %s counted out, %v after %s's JetStream was disabled", leaders(rest)[0].cfg.Self, full.cfg.Self, time.Since(disabled), full.cfg.Self)
	full.c.mu.Lock()
	full.c.free = freeSpace
	full.c.mu.Unlock()
	freed := time.Now()
	waitFor(t, 10*testTTL, full.cfg.Self+" stores and rejoins", func() bool {
		if v := full.c.View(); !v.InCluster || v.Store != "" {
			return false
		}
		for _, n := range rest {
			if upCount(n.c.View()) != 3 {
				return false
			}
		}
		return true
	})
	t.Logf("%s back in the cluster %v after its store had room again", full.cfg.Self, time.Since(freed))
}

// TestFullTmpfsStoreLeavesTheCluster: node a's store is a 24 MiB tmpfs
// (mounted here: the test needs root), filled up with a file while the
// cluster writes votes; the embedded server disables its JetStream at
// the first write that finds no space, and a says it cannot store.
// Once the file is removed, a starts its server again and rejoins.
func TestFullTmpfsStoreLeavesTheCluster(t *testing.T) {
	cfgs := testConfigs(t, 3, Majority)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs for the store (the test needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() }) // after the nodes stop
	cfgs[0].Store = dir
	var nodes []*testNode
	for _, c := range cfgs {
		nodes = append(nodes, startNode(t, c))
	}
	for _, nd := range nodes {
		waitFor(t, 30*time.Second, nd.cfg.Self+" sees 3 members up", func() bool { return upCount(nd.c.View()) == 3 })
	}
	a := nodes[0]
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 1<<16); err == nil; {
		_, err = f.Write(buf)
	}
	f.Close()
	filled, i := time.Now(), 0
	out := waitFor(t, 20*testTTL, "a says it cannot store", func() bool {
		i++ // b's votes: writes to every replica, a's too
		nodes[1].c.Report(fmt.Sprintf("t/sip:10.9.%d.%d:5060", i/256%256, i%256), qualify.Unreachable)
		return a.c.View().Store != ""
	})
	t.Logf("a out of the cluster %v after its store filled up: %s", out, a.c.View().Store)
	if v := a.c.View(); v.InCluster || v.Leading {
		t.Errorf("a unable to store: in the cluster %v, leading %v", v.InCluster, v.Leading)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	back := waitFor(t, 20*testTTL, "a stores and rejoins", func() bool { v := a.c.View(); return v.InCluster && v.Store == "" })
	t.Logf("a back in the cluster %v after the space was freed (%v after it filled up)", back, time.Since(filled))
}
