package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
	"github.com/qualifyd/qualifyd/internal/sipprobe"
)

// demoPolicies are the two AoRs the demo runs side by side on the same
// peer: Asterisk's behaviour, and qualifyd's consecutive failures with a
// fast retry. Timings are shrunk (F = 5 s, T = 1 s) so a cycle takes a
// minute.
func demoPolicies(uri func(user string) string) []engine.AoR {
	legacy := qualify.Policy{Frequency: 5 * time.Second, Timeout: time.Second}
	tuned := qualify.Policy{Frequency: 5 * time.Second, Timeout: time.Second, Failures: 3, RetryInterval: time.Second}
	return []engine.AoR{
		{Name: "asterisk", Contacts: []string{uri("legacy")}, Policy: legacy},
		{Name: "qualifyd", Contacts: []string{uri("tuned")}, Policy: tuned},
	}
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dur := fs.Duration("duration", demoCycleLength, "how long to run; 0 runs until interrupted")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := demo(ctx, *dur, stdout); err != nil {
		fmt.Fprintln(stderr, "qualifyd demo:", err)
		return 1
	}
	return 0
}

// demo runs the scripted peer, the real prober and the engine on loopback
// and prints the log lines of both AoRs, then a summary.
func demo(ctx context.Context, dur time.Duration, w io.Writer) error {
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
	eng, err := engine.New(engine.Config{Prober: prober, Rand: func() float64 { return 0 }})
	if err != nil {
		return err
	}
	aors := demoPolicies(func(u string) string { return "sip:" + u + "@" + resp.Addr().String() })
	if err := eng.Apply(aors); err != nil {
		return err
	}
	printDemoHeader(w, resp, aors)
	if dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	tally := watch(ctx, eng, start, w)
	tally.print(w)
	return nil
}

func printDemoHeader(w io.Writer, resp *responder.Responder, aors []engine.AoR) {
	fmt.Fprintf(w, "qualifyd demo: a scripted SIP peer on udp %s, qualified by two AoRs side by side\n", resp.Addr())
	for _, a := range aors {
		p := a.Policy
		fmt.Fprintf(w, "  %-9s qualify_frequency=%s qualify_timeout=%s qualify_failures=%d qualify_retry_interval=%s\n",
			a.Name, asterisk.Seconds(p.Frequency), asterisk.Seconds(p.Timeout), p.FailureThreshold(), asterisk.Seconds(p.RetryInterval))
	}
	fmt.Fprintln(w, "the peer's script repeats every minute: healthy, one lost probe at 10s, 50% loss from 20s, dead from 38s, back at 50s")
	fmt.Fprintln(w)
}

// watch runs the engine until ctx ends, printing each event's log line and
// each change of the peer's phase, and returns the tally of outages.
func watch(ctx context.Context, eng *engine.Engine, start time.Time, w io.Writer) *demoTally {
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
