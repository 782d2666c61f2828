package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// blipPrefix names the blip lab's namespaces, apart from the lossy lab's.
const blipPrefix = "qdpanic-"

// blipSettings are one blip run's scale, policy and blips.
type blipSettings struct {
	AoRs, Dead int             // AoRs, each its own destination; the last Dead never answer
	Frequency  int             // qualify_frequency, whole seconds
	Timeout    time.Duration   // qualify_timeout
	Failures   int             // qualify_failures
	Retry      time.Duration   // qualify_retry_interval
	Blips      []time.Duration // qualifyd's link to the peers down this long, one after the other
	Watch      time.Duration   // watched after each blip's end, for late downs
	Qualifyd   string          // the qualifyd binary
	KamCfg     string          // the kamailio.cfg of docs/routers.md
	Dir        string          // logs and generated files
}

// soakBlip is `make blip`: the soak's scale and policy.
func soakBlip() blipSettings {
	return blipSettings{AoRs: 5000, Dead: 500, Frequency: 10, Timeout: 2 * time.Second, Failures: 3, Retry: time.Second,
		Blips: []time.Duration{15 * time.Second, 60 * time.Second}, Watch: 30 * time.Second}
}

// blipRow is one blip's figures.
type blipRow struct {
	Blip           time.Duration
	PanicAt        time.Duration // from the blip's start; -1 never
	CalmAt         time.Duration // from the blip's start; -1 never
	FalseKamailio  [3]int        // destinations up before the blip confirmed inactive: before, during, after the panic
	FalseWebhook   [3]int        // webhook objects up before the blip sent down: before, during, after
	TakenKamailio  int           // of FalseKamailio[0], those the panic took back (confirmed active during it)
	TakenWebhook   int           // of FalseWebhook[0], those the panic took back (sent up during it)
	DeadUpKamailio int           // dead destinations confirmed active
	DeadUpWebhook  int           // dead objects sent up
	Settled        time.Duration // from the blip's end until both routers were as before, for good
	Polls          int           // Kamailio reads after the blip's end
}

// blipRun is one run's processes, routers and records.
type blipRun struct {
	s     blipSettings
	lab   netLab
	procs []*proc
	live  *responder.Group
	dead  *responder.Group
	dests []string        // every destination, "10.200.6.2:PORT", AoR i on dests[i]
	isDea map[string]bool // destination -> really dead
	kam   string          // Kamailio's RPC URL (in the prober's namespace)
	rpc   *http.Client    // dials inside the prober's namespace
	hook  *hookRecorder
	srv   *http.Server

	mu    sync.Mutex
	kamTo []stamped // qualifyd's "host X is now up/down in the router" lines of the Kamailio sink
	panic []stamped // "panic" (entered) and "calm" (over)
}

// stamped is one thing seen at one time.
type stamped struct {
	at   time.Time
	key  string // destination, or "panic"/"calm"
	down bool
}

// inNamespace runs fn on a thread inside network namespace ns, so that the
// sockets fn opens live there. A thread that cannot get back to its own
// namespace is left locked, and dies with its goroutine.
func inNamespace(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer own.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := setns(target.Fd()); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := setns(own.Fd()); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// setns moves the calling thread into the network namespace of fd.
func setns(fd uintptr) error { return unix.Setns(int(fd), unix.CLONE_NEWNET) }

// hookRecorder is the webhook receiver: every contact and AoR change
// qualifyd sends, with its arrival time.
type hookRecorder struct {
	mu   sync.Mutex
	seen []stamped // key "contact AOR" or "aor AOR"
	last map[string]bool
}

func (h *hookRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var c struct{ Kind, AoR, To string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&c); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if c.Kind != "contact" && c.Kind != "aor" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	key := c.Kind + " " + c.AoR
	h.seen = append(h.seen, stamped{at: time.Now(), key: key, down: c.To == "down"})
	h.last[key] = c.To == "down"
}

// downs returns the objects the receiver holds down.
func (h *hookRecorder) downs() map[string]bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]bool{}
	for k, d := range h.last {
		if d {
			out[k] = true
		}
	}
	return out
}

// since returns what arrived at or after t.
func (h *hookRecorder) since(t time.Time) []stamped {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []stamped
	for _, s := range h.seen {
		if !s.at.Before(t) {
			out = append(out, s)
		}
	}
	return out
}

// aorName is AoR i's name.
func aorName(i int) string { return fmt.Sprintf("t%05d", i) }

// blip runs the experiment and returns one row per blip.
func blip(ctx context.Context, s blipSettings, progress io.Writer) (rows []blipRow, err error) {
	if err := blipPreflight(s); err != nil {
		return nil, err
	}
	removeStale(ctx)
	r := &blipRun{s: s, lab: namedNetLab(blipPrefix, "qdp", os.Getpid()), isDea: map[string]bool{},
		hook: &hookRecorder{last: map[string]bool{}}}
	defer func() { err = errors.Join(err, r.teardown()) }()
	if err := r.lab.up(ctx); err != nil {
		return nil, err
	}
	if err := r.startAll(); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "%s %d AoRs (%d dead), F %ds T %v N %d R %v: waiting for the routers\n",
		stamp(time.Now()), s.AoRs, s.Dead, s.Frequency, s.Timeout, s.Failures, s.Retry)
	if err := r.awaitBefore(ctx, time.Duration(3*s.Frequency)*time.Second+30*time.Second); err != nil {
		return nil, err
	}
	// The dead trunks were dead before the trouble, as an operator's are:
	// their streaks began more than the panic's wait H = F + T before the
	// first blip, so the panic's take-back (qualify-semantics §6.1) keeps
	// them down. A blip within H of their first failures could not tell
	// them from its own event.
	h := time.Duration(s.Frequency)*time.Second + s.Timeout
	fmt.Fprintf(progress, "%s the dead are down: %v more, the panic's wait, before the first blip\n", stamp(time.Now()), h)
	if !sleepCtx(ctx, h) {
		return nil, ctx.Err()
	}
	for _, b := range s.Blips {
		row, err := r.runBlip(ctx, b, progress)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// blipPreflight checks the tools and the settings.
func blipPreflight(s blipSettings) error {
	if os.Geteuid() != 0 {
		return errors.New("the blip lab needs root (network namespaces, nftables)")
	}
	for _, tool := range []string{"ip", "nft", "kamailio"} {
		if _, err := execLookPath(tool); err != nil {
			return fmt.Errorf("the blip lab needs %s: %w", tool, err)
		}
	}
	if s.AoRs < 10 || s.Dead < 0 || s.Dead >= s.AoRs || s.Frequency < 1 || len(s.Blips) == 0 {
		return fmt.Errorf("settings %+v: want at least 10 AoRs, fewer dead, F >= 1 s, a blip", s)
	}
	if _, err := os.Stat(s.KamCfg); err != nil {
		return fmt.Errorf("kamailio.cfg: %w", err)
	}
	return nil
}

// teardown stops everything and removes the namespaces.
func (r *blipRun) teardown() error {
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop(5 * time.Second)
	}
	if r.srv != nil {
		_ = r.srv.Close()
	}
	for _, g := range []*responder.Group{r.live, r.dead} {
		if g != nil {
			_ = g.Close()
		}
	}
	return r.lab.down()
}
