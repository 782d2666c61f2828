package sipprobe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emiago/sipgo"
	"github.com/emiago/sipgo/sip"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// The benchmarks probe a fast responder running in a child process (this
// test binary re-executed), so the process CPU time read with getrusage is
// the client's alone.

const responderEnv = "SIPPROBE_BENCH_RESPONDER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(responderEnv); mode != "" {
		runFastResponder(mode == "silent")
		return
	}
	os.Exit(m.Run())
}

// runFastResponder answers every OPTIONS on a UDP socket with 200 OK by
// rewriting its start line (all headers echoed), or stays silent. It
// prints its address and runs until stdin closes.
func runFastResponder(silent bool) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	setBuffers(c, 64<<20, 64<<20)
	fmt.Println(c.LocalAddr().String())
	for range max(runtime.NumCPU()-1, 1) {
		go echo200(c, silent)
	}
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

func echo200(c *net.UDPConn, silent bool) {
	in, out := make([]byte, 65536), make([]byte, 0, 65536)
	for {
		n, src, err := c.ReadFromUDPAddrPort(in)
		if err != nil {
			return
		}
		i := bytes.Index(in[:n], []byte("\r\n"))
		if silent || i < 0 || !bytes.HasPrefix(in[:n], []byte("OPTIONS ")) {
			continue
		}
		out = append(append(out[:0], "SIP/2.0 200 OK\r\n"...), in[i+2:n]...)
		_, _ = c.WriteToUDPAddrPort(out, src)
	}
}

// startFastResponder starts the child responder and returns its address.
func startFastResponder(tb testing.TB, silent bool) netip.AddrPort {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	mode := "answer"
	if silent {
		mode = "silent"
	}
	cmd.Env = append(os.Environ(), responderEnv+"="+mode)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, perr := netip.ParseAddrPort(strings.TrimSpace(line))
	if err != nil || perr != nil {
		tb.Fatalf("responder: %q %v %v", line, err, perr)
	}
	return addr
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runProbes runs b.N probes from 64 goroutines per CPU and reports
// probes/s, client CPU us/probe and the failures.
func runProbes(b *testing.B, probe func(ctx context.Context) bool) {
	b.ReportAllocs()
	b.SetParallelism(64)
	var failed atomic.Int64
	cpu0, t0 := cpuTime(), time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !probe(b.Context()) {
				failed.Add(1)
			}
		}
	})
	b.StopTimer()
	elapsed, cpu := time.Since(t0), cpuTime()-cpu0
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "probes/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/probe")
	b.ReportMetric(float64(failed.Load()), "failed")
}

// BenchmarkProbeUDP: this prober against the fast responder.
func BenchmarkProbeUDP(b *testing.B) {
	addr := startFastResponder(b, false)
	p, err := New(Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	tg := target("sip:bench@"+addr.String(), 5*time.Second)
	runProbes(b, func(ctx context.Context) bool { return p.Probe(ctx, tg).Code == 200 })
}

// BenchmarkSipgoUDP: the baseline, sipgo's client.Do, same responder.
func BenchmarkSipgoUDP(b *testing.B) {
	addr := startFastResponder(b, false)
	client := newSipgoClient(b)
	runProbes(b, func(ctx context.Context) bool { return sipgoProbe(ctx, client, addr, 5*time.Second) })
}

func newSipgoClient(tb testing.TB) *sipgo.Client {
	// sipgo logs every unmatched retransmission through slog's default
	// logger; the baseline runs silent.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	ua, err := sipgo.NewUA(sipgo.WithUserAgent("bench"))
	if err != nil {
		tb.Fatal(err)
	}
	client, err := sipgo.NewClient(ua, sipgo.WithClientHostname("127.0.0.1"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = client.Close(); _ = ua.Close() })
	return client
}

// sipgoProbe is one OPTIONS with sipgo; true on a 200.
func sipgoProbe(ctx context.Context, c *sipgo.Client, addr netip.AddrPort, timeout time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := sip.NewRequest(sip.OPTIONS, sip.Uri{Scheme: "sip", User: "bench", Host: addr.Addr().String(), Port: int(addr.Port())})
	res, err := c.Do(ctx, req)
	return err == nil && res.StatusCode == 200
}

// inFlightReport is what measureInFlight saw.
type inFlightReport struct {
	lost                     int64
	heapPerProbe, stackPerPr float64
	took                     time.Duration
}

// measureInFlight starts n probes at once, each in its own goroutine (as
// the engine does), and waits for them. It returns how many did not get a
// 200 and the peak heap and stack growth per probe, sampled while they
// were in flight.
func measureInFlight(n int, probe func() bool) inFlightReport {
	var base runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&base)
	stop, peak := make(chan struct{}), make(chan [2]uint64)
	go samplePeak(stop, peak)
	var lost atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Go(func() {
			if !probe() {
				lost.Add(1)
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	close(stop)
	pk := <-peak
	return inFlightReport{lost: lost.Load(), took: took,
		heapPerProbe: float64(int64(pk[0])-int64(base.HeapAlloc)) / float64(n),
		stackPerPr:   float64(int64(pk[1])-int64(base.StackInuse)) / float64(n)}
}

// samplePeak records the largest HeapAlloc and StackInuse until stop.
func samplePeak(stop <-chan struct{}, out chan<- [2]uint64) {
	var pk [2]uint64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		pk[0], pk[1] = max(pk[0], ms.HeapAlloc), max(pk[1], ms.StackInuse)
		select {
		case <-stop:
			out <- pk
			return
		case <-tick.C:
		}
	}
}

// reportInFlight reports r; lostMetric names the probes without a 200.
func reportInFlight(b *testing.B, r inFlightReport, lostMetric string) {
	b.ReportMetric(float64(r.lost), lostMetric)
	b.ReportMetric(r.heapPerProbe, "heap-B/inflight")
	b.ReportMetric(r.stackPerPr, "stack-B/inflight")
	b.ReportMetric(r.took.Seconds(), "s/100k")
}

const inFlightN = 100_000

// BenchmarkInFlight100k: 100,000 probes started at once against the fast
// responder with a 10 s deadline; every one must get its 200 (losses in
// socket buffers are recovered by Timer E). Memory is read once all were
// sent.
func BenchmarkInFlight100k(b *testing.B) {
	addr := startFastResponder(b, false)
	for range b.N {
		p, err := New(Config{ListenAddr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		tg := target("sip:bench@"+addr.String(), 10*time.Second)
		r := measureInFlight(inFlightN, func() bool { return p.Probe(b.Context(), tg).Code == 200 })
		_ = p.Close()
		reportInFlight(b, r, "false-timeouts")
	}
}

// BenchmarkSipgoInFlight100k: the same with sipgo's client.
func BenchmarkSipgoInFlight100k(b *testing.B) {
	addr := startFastResponder(b, false)
	for range b.N {
		client := newSipgoClient(b)
		r := measureInFlight(inFlightN, func() bool { return sipgoProbe(b.Context(), client, addr, 10*time.Second) })
		reportInFlight(b, r, "false-timeouts")
	}
}

// BenchmarkInFlightSilent: the memory of 100,000 probes in flight to a
// silent peer (all of them wait for their 1 s deadline), this prober and
// sipgo. Here every probe must time out.
func BenchmarkInFlightSilent(b *testing.B) {
	addr := startFastResponder(b, true)
	b.Run("sipprobe", func(b *testing.B) {
		for range b.N {
			p, err := New(Config{ListenAddr: "127.0.0.1:0"})
			if err != nil {
				b.Fatal(err)
			}
			tg := target("sip:bench@"+addr.String(), time.Second)
			reportInFlight(b, measureInFlight(inFlightN, func() bool { return p.Probe(b.Context(), tg).Code == 200 }), "timeouts")
			_ = p.Close()
		}
	})
	b.Run("sipgo", func(b *testing.B) {
		for range b.N {
			client := newSipgoClient(b)
			reportInFlight(b, measureInFlight(inFlightN, func() bool { return sipgoProbe(b.Context(), client, addr, time.Second) }), "timeouts")
		}
	})
}

// TestInFlight: inFlightTestN probes in flight at once (100,000; fewer
// under the race detector, which caps live goroutines at 8128) against a
// fast responder: none may time out falsely.
func TestInFlight(t *testing.T) {
	addr := startFastResponder(t, false)
	p := newProber(t, Config{})
	tg := target("sip:bench@"+addr.String(), 20*time.Second)
	r := measureInFlight(inFlightTestN, func() bool { return p.Probe(t.Context(), tg).Code == 200 })
	s := p.Stats()
	if r.lost != 0 || s.Matched != inFlightTestN {
		t.Fatalf("%d of %d probes lost; stats %+v", r.lost, inFlightTestN, s)
	}
	t.Logf("%d in flight: %v, %d retransmissions", inFlightTestN, r.took, s.Retransmissions)
}

// BenchmarkInFlightAsyncSilent: the live heap of 100,000 probes
// started with Start, as the engine starts them, in flight at once to a
// silent peer, read after a forced collection once all were sent: what a
// probe in flight costs when a contact is dead. Every probe must time
// out.
func BenchmarkInFlightAsyncSilent(b *testing.B) {
	addr := startFastResponder(b, true)
	for range b.N {
		p, err := New(Config{ListenAddr: "127.0.0.1:0"})
		if err != nil {
			b.Fatal(err)
		}
		tg := target("sip:bench@"+addr.String(), 5*time.Second)
		var base, sent runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&base)
		var wg sync.WaitGroup
		var answered atomic.Int64
		wg.Add(inFlightN)
		done := func(_ uint64, r qualify.Result) {
			if r.Reason != qualify.ReasonTimeout {
				answered.Add(1)
			}
			wg.Done()
		}
		for i := range inFlightN {
			p.Start(b.Context(), tg, uint64(i), done)
		}
		runtime.GC()
		runtime.ReadMemStats(&sent)
		wg.Wait()
		_ = p.Close()
		b.ReportMetric(float64(int64(sent.HeapAlloc)-int64(base.HeapAlloc))/inFlightN, "heap-live-B/inflight")
		b.ReportMetric(float64(answered.Load()), "not-timed-out")
	}
}
