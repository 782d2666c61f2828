package engine

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// asyncProbes makes newHarness's prober an AsyncProber.
var asyncProbes bool

// TestMain runs every engine test three times: with a Prober that blocks
// for each probe (one goroutine per probe in flight), with an AsyncProber
// (the scheduler's loop starts probes, results finish them), and with a
// DatagramProber (the engine times the probes, answers finish them).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		fmt.Fprintln(os.Stderr, "engine: the same tests with an asynchronous prober")
		asyncProbes = true
		code = m.Run()
	}
	if code == 0 {
		fmt.Fprintln(os.Stderr, "engine: the same tests with a datagram prober (the engine times the probes)")
		asyncProbes, datagramProbes = false, true
		code = m.Run()
	}
	os.Exit(code)
}

// asyncFake is the fake prober behind the AsyncProber interface: each
// result is delivered from another goroutine, as a real prober's receive
// or timer goroutine would.
type asyncFake struct{ *fakeProber }

func (f asyncFake) Start(ctx context.Context, t qualify.Target, tag uint64, done func(uint64, qualify.Result)) {
	go func() { done(tag, f.Probe(ctx, t)) }()
}

func TestAsyncProberIsUsed(t *testing.T) {
	e, err := New(Config{Prober: asyncFake{&fakeProber{}}})
	if err != nil {
		t.Fatal(err)
	}
	if e.async == nil {
		t.Fatal("an AsyncProber is not used asynchronously")
	}
	if e, _ := New(Config{Prober: &fakeProber{}}); e.async != nil {
		t.Fatal("a blocking Prober is used asynchronously")
	}
}
