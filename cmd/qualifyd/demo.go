package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/daemon"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/responder"
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

// demoBucket is the width of the demo's history buckets, one probe
// interval (F), so that the status page's charts tell the demo's story
// within its minute.
const demoBucket = 5 * time.Second

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, "demo [--duration D] [--http ADDR]")
	dur := fs.Duration("duration", demoCycleLength, "how long to run; 0 runs until interrupted")
	addr := fs.String("http", "127.0.0.1:8089", "HTTP API address (an ephemeral port if busy); empty disables HTTP")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageExit(err)
	}
	if len(pos) != 0 {
		fmt.Fprintf(stderr, "qualifyd demo: unexpected argument %q\n", pos[0])
		fs.Usage()
		return 2
	}
	if err := demo(ctx, *dur, *addr, stdout); err != nil {
		fmt.Fprintln(stderr, "qualifyd demo:", err)
		return 1
	}
	return 0
}

// demo runs the scripted peer on loopback and the daemon qualifying it
// with the demo's AoRs, serves the daemon's HTTP API on addr, and prints
// the daemon's log, each line stamped with the seconds since the start,
// then a summary.
func demo(ctx context.Context, dur time.Duration, addr string, w io.Writer) error {
	start := time.Now()
	peer := newDemoPeer(start)
	resp, err := responder.Listen("127.0.0.1:0", peer.decide)
	if err != nil {
		return err
	}
	defer resp.Close()
	aors := demoPolicies(func(u string) string { return "sip:" + u + "@" + resp.Addr().String() })
	d, err := daemon.New(daemon.Config{
		Load: demoConfig(aors), SIPBind: "127.0.0.1:0", Rand: func() float64 { return 0 },
		HTTPAddr: addr, HTTPFallback: true, Version: version(), Log: w, LogStamp: sinceStamp(start),
		HistoryBucket: demoBucket,
	})
	if err != nil {
		return err
	}
	d.Log().Sync(time.Second) // the log writes w from its own goroutine
	printDemoHeader(w, resp, aors, d.URL())
	if dur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dur)
		defer cancel()
	}
	sub := d.Engine().Subscribe(1024)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	tally := narrate(ctx, d.Log(), sub, start)
	err = <-done
	sub.Close()
	tally.finish(time.Since(start))
	tally.print(w)
	return err
}

// demoConfig is the demo's configuration source: aors, each with an
// endpoint of its name.
func demoConfig(aors []engine.AoR) func() (*pjsip.Config, error) {
	return func() (*pjsip.Config, error) {
		conf := &pjsip.Config{}
		for _, a := range aors {
			conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: a})
			conf.Endpoints = append(conf.Endpoints, pjsip.Endpoint{Name: a.Name, AoRs: []string{a.Name}})
		}
		return conf, nil
	}
}

// sinceStamp stamps a log line with the seconds since start.
func sinceStamp(start time.Time) func([]byte, time.Time) []byte {
	return func(dst []byte, t time.Time) []byte {
		return fmt.Appendf(dst, "%7.3fs", t.Sub(start).Seconds())
	}
}

func printDemoHeader(w io.Writer, resp *responder.Responder, aors []engine.AoR, url string) {
	fmt.Fprintf(w, "qualifyd demo: a scripted SIP peer on udp %s, qualified by two AoRs side by side\n", resp.Addr())
	for _, a := range aors {
		p := a.Policy
		fmt.Fprintf(w, "  %-9s qualify_frequency=%s qualify_timeout=%s qualify_failures=%d qualify_retry_interval=%s\n",
			a.Name, asterisk.Seconds(p.Frequency), asterisk.Seconds(p.Timeout), p.FailureThreshold(), asterisk.Seconds(p.RetryInterval))
	}
	fmt.Fprintln(w, "the peer's script repeats every minute: healthy, one lost probe at 10s, 50% loss from 20s, dead from 38s, back at 50s")
	if url != "" {
		fmt.Fprintf(w, "status page %s/ ; API %s/api/v1/contacts ; endpoints %s/api/v1/endpoints ; events %s/api/v1/events ; metrics %s/metrics\n", url, url, url, url, url)
		fmt.Fprintf(w, "(try: qualifyd show aors --http %s)\n", strings.TrimPrefix(url, "http://"))
	}
	fmt.Fprintln(w)
}

// narrate tallies the engine's events from sub and logs each change of the
// peer's phase, until ctx ends; it returns the tally of outages.
func narrate(ctx context.Context, log *daemon.Log, sub *engine.Subscription, start time.Time) *demoTally {
	tally := newDemoTally()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return tally
		case ev := <-sub.C:
			tally.observe(ev, ev.Time.Sub(start))
		case now := <-tick.C:
			if ph := phaseAt(now.Sub(start)); ph.name != last {
				last = ph.name
				log.Line(now, "-- peer: "+ph.name)
			}
		}
	}
}
