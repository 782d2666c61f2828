package daemon

import (
	"sync"
	"testing"

	"github.com/qualifyd/qualifyd/internal/cluster"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// BenchmarkVerdictDuringReload is the Verdict hook's time while reloads
// of 100,000 AoRs run back to back: "hook" is the hook as it is (it
// queues the AoR), "locked" the sinks' AoRChanged it used to call, which
// waits for the reload's lock; the ratio of the two is the figure.
func BenchmarkVerdictDuringReload(b *testing.B) {
	const aors = 100_000
	src := &gatedSource{status: qualify.Reachable}
	n := verdictNode(b, src)
	conf := verdictConf(aors)
	n.d.sinks.Configure(conf)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n.d.sinks.Configure(conf)
		}
	})
	defer func() { close(stop); wg.Wait() }()
	v := cluster.Verdict{Contact: ContactKey("t7", "sip:t7@192.0.2.1"), Status: qualify.NonQualified}
	b.Run("hook", func(b *testing.B) {
		for b.Loop() {
			n.verdict(v)
		}
		n.changed.take()
	})
	b.Run("locked", func(b *testing.B) {
		for b.Loop() {
			n.d.sinks.AoRChanged("t7")
		}
	})
}
