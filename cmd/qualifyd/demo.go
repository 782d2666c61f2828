package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/metrics"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
	"github.com/qualifyd/qualifyd/internal/web"
)

// demoPolicies are the two AoRs the demo runs side by side on the same
// peer: Asterisk's behaviour, and qualifyd's consecutive failures with a
// fast retry. Timings are shrunk (F = 5 s, T = 1 s) so a cycle takes a
// minute.
func demoPolicies(uri func(user string) string) []engine.AoR {
	legacy := qualify.Policy{Frequency: 5 * time.Second, Timeout: time.Second}
	tuned := qualify.Policy{Frequency: 5 * time.Second, Timeout: time.Second, Failures: 3, RetryInterval: time.Second}
	return []engine.AoR{
		{Name: "asterisk", Contacts: []string{uri("legacy")}, Policy: &legacy},
		{Name: "qualifyd", Contacts: []string{uri("tuned")}, Policy: &tuned},
	}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", demoCycleLength, "how long to run; 0 runs until interrupted")
	addr := fs.String("http", "127.0.0.1:8089", "HTTP API address (an ephemeral port if busy); empty disables HTTP")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := demo(ctx, *dur, *addr, stdout); err != nil {
		fmt.Fprintln(stderr, "qualifyd demo:", err)
		return 1
	}
	return 0
}

// demo runs the scripted peer, the real prober and the engine on loopback,
// serves the daemon's HTTP API on addr, and prints the log lines of both
// AoRs, then a summary.
func demo(ctx context.Context, dur time.Duration, addr string, w io.Writer) error {
	start := time.Now()
	peer := newDemoPeer(start)
	resp, err := responder.Listen("127.0.0.1:0", peer.decide)
	if err != nil {
		return err
	}
	defer resp.Close()
	prober, err := sipprobe.New(sipprobe.Config{ListenAddr: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer prober.Close()
	var eng *engine.Engine
	reg, m, err := newMetrics(func() (*engine.Engine, *sipprobe.Prober) { return eng, prober }, nil, 0)
	if err != nil {
		return err
	}
	eng, err = engine.New(engine.Config{Prober: prober, Rand: func() float64 { return 0 },
		Observe: m.ObserveProbe, Lateness: m.ObserveLateness})
	if err != nil {
		return err
	}
	aors := demoPolicies(func(u string) string { return "sip:" + u + "@" + resp.Addr().String() })
	if err := eng.Apply(aors); err != nil {
		return err
	}
	front, err := demoHTTP(addr, web.Config{Engine: eng, Gatherer: reg}, m)
	if err != nil {
		return err
	}
	printDemoHeader(w, resp, aors, front)
	if dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	if front != nil {
		done := make(chan error, 1)
		go func() { done <- front.run(ctx) }()
		defer func() { <-done }()
	}
	tally := watch(ctx, eng, m, start, w)
	tally.finish(time.Since(start))
	tally.print(w)
	return nil
}

// demoHTTP binds the demo's API on addr, or on an ephemeral loopback port
// when addr is busy; nil when addr is empty.
func demoHTTP(addr string, cfg web.Config, m *metrics.Metrics) (*httpFront, error) {
	if addr == "" {
		return nil, nil
	}
	front, err := newHTTPFront(addr, cfg, m)
	if err != nil {
		front, err = newHTTPFront("127.0.0.1:0", cfg, m)
	}
	return front, err
}

func printDemoHeader(w io.Writer, resp *responder.Responder, aors []engine.AoR, front *httpFront) {
	fmt.Fprintf(w, "qualifyd demo: a scripted SIP peer on udp %s, qualified by two AoRs side by side\n", resp.Addr())
	for _, a := range aors {
		p := a.Policy
		fmt.Fprintf(w, "  %-9s qualify_frequency=%s qualify_timeout=%s qualify_failures=%d qualify_retry_interval=%s\n",
			a.Name, asterisk.Seconds(p.Frequency), asterisk.Seconds(p.Timeout), p.FailureThreshold(), asterisk.Seconds(p.RetryInterval))
	}
	fmt.Fprintln(w, "the peer's script repeats every minute: healthy, one lost probe at 10s, 50% loss from 20s, dead from 38s, back at 50s")
	if front != nil {
		u := front.URL()
		fmt.Fprintf(w, "status page %s/ ; API %s/api/v1/contacts ; events %s/api/v1/events ; metrics %s/metrics\n", u, u, u, u)
		fmt.Fprintf(w, "(try: qualifyd show aors --http %s)\n", strings.TrimPrefix(u, "http://"))
	}
	fmt.Fprintln(w)
}

// watch runs the engine until ctx ends, printing each event's log line and
// each change of the peer's phase, and returns the tally of outages.
func watch(ctx context.Context, eng *engine.Engine, m *metrics.Metrics, start time.Time, w io.Writer) *demoTally {
	sub := eng.Subscribe(1024)
	defer sub.Close()
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { eng.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()
	tally := newDemoTally()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return tally
		case ev := <-sub.C:
			m.ObserveEvent(ev)
			at := ev.Time.Sub(start)
			tally.observe(ev, at)
			if line, ok := asterisk.Line(ev); ok {
				fmt.Fprintf(w, "[%7.3fs] %s\n", at.Seconds(), line)
			}
		case <-tick.C:
			if ph := phaseAt(time.Since(start)); ph.name != last {
				last = ph.name
				fmt.Fprintf(w, "[%7.3fs] -- peer: %s\n", time.Since(start).Seconds(), ph.name)
			}
		}
	}
}
