package sink

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// countingDriver counts pushes and signals when n have been made.
type countingDriver struct {
	gate chan struct{}
	n    int
	done chan struct{}
}

func (d *countingDriver) connect(ctx context.Context) error {
	select {
	case <-d.gate: // a stalled router, until it recovers
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *countingDriver) push(context.Context, Object) error {
	if d.n--; d.n == 0 {
		close(d.done)
	}
	return nil
}

func (d *countingDriver) close() {}

// BenchmarkSinkBurst flips 100,000 objects Down at once while the router
// is stalled, then lets it recover, and reports the time from recovery
// to every object confirmed, and the reconciler's heap per object.
func BenchmarkSinkBurst(b *testing.B) {
	const objects = 100_000
	keys := make([]Key, objects)
	for i := range keys {
		keys[i] = Key{Kind: KindDevice, Name: "pbx" + strconv.Itoa(i)}
	}
	var converge time.Duration
	var perObject float64
	for b.Loop() {
		d := &countingDriver{gate: make(chan struct{}), n: objects, done: make(chan struct{})}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		r := newReconciler("bench", d, Intervals{}, nil, nil)
		for _, k := range keys {
			r.Set(k, Up, 0)
			r.Set(k, Down, 0)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perObject = float64(after.HeapAlloc-before.HeapAlloc) / objects
		ctx, cancel := context.WithCancel(context.Background())
		go r.Run(ctx)
		t0 := time.Now()
		close(d.gate)
		<-d.done
		converge = time.Since(t0)
		cancel()
		runtime.KeepAlive(r)
	}
	b.ReportMetric(converge.Seconds()*1000, "ms-to-converge")
	b.ReportMetric(perObject, "B/object")
}

// BenchmarkPanicAoRChanged is the cost of one status change to the panic
// rule (the census and its evaluation, no sink) at 1,000 and 100,000
// destinations: the same, as the counts are kept.
func BenchmarkPanicAoRChanged(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c, src := trunks(n, pjsip.Panic{})
			g := NewGroup(Config{Source: src})
			g.Configure(c)
			st := []qualify.Status{qualify.Reachable, qualify.Unreachable}
			i := 0
			for b.Loop() {
				name := "trunk" + strconv.Itoa(i%n)
				src.set(name, st[(i/n)%2])
				g.AoRChanged(name)
				i++
			}
		})
	}
}
