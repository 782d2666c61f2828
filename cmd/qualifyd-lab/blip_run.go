package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/qualifyd/qualifyd/internal/responder"
)

// execLookPath is exec.LookPath (a variable for nothing but brevity).
var execLookPath = exec.LookPath

// The routers listen on loopback inside the prober's namespace: a blip of
// qualifyd's link to the peers leaves them reachable.
const (
	blipKamSIP  = "127.0.0.1:5060"
	blipKamHTTP = 5071
)

// startAll opens the responders in the peers' namespace, the webhook
// receiver in the prober's, then starts Kamailio and qualifyd there.
func (r *blipRun) startAll() error {
	raiseFiles()
	live, dead := r.s.AoRs-r.s.Dead, r.s.Dead
	err := inNamespace(r.lab.nsR, func() error {
		var err error
		if r.live, err = responder.ListenGroup(responderIP, live, nil); err != nil {
			return err
		}
		r.dead, err = responder.ListenGroup(responderIP, dead, func(netip.AddrPort) responder.Action { return responder.Action{Drop: true} })
		return err
	})
	if err != nil {
		return fmt.Errorf("responders: %w", err)
	}
	for _, a := range r.live.Addrs() {
		r.dests = append(r.dests, a.String())
	}
	for _, a := range r.dead.Addrs() {
		r.dests = append(r.dests, a.String())
		r.isDea[a.String()] = true
	}
	var ln net.Listener
	if err := inNamespace(r.lab.nsP, func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		return fmt.Errorf("webhook receiver: %w", err)
	}
	r.srv = &http.Server{Handler: r.hook, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	r.rpc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: r.dialP}}
	r.kam = fmt.Sprintf("http://127.0.0.1:%d/RPC", blipKamHTTP)
	if err := r.writeFiles(ln.Addr().String()); err != nil {
		return err
	}
	if err := r.startKamailio(); err != nil {
		return err
	}
	return r.startQualifyd()
}

// raiseFiles lifts the open files limit to its hard maximum: the
// responders hold one socket per destination.
func raiseFiles() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// dialP dials from inside the prober's namespace.
func (r *blipRun) dialP(ctx context.Context, network, addr string) (c net.Conn, err error) {
	err = inNamespace(r.lab.nsP, func() error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// writeFiles writes qualifyd's pjsip.conf and Kamailio's dispatcher.list.
func (r *blipRun) writeFiles(hook string) error {
	var conf, list strings.Builder
	fmt.Fprintf(&conf, "; qualifyd-lab blip: %d AoRs, each its own destination\n", len(r.dests))
	for i, d := range r.dests {
		fmt.Fprintf(&conf, "[%s]\ntype=aor\ncontact=sip:%s\nqualify_frequency=%d\nqualify_timeout=%s\nqualify_failures=%d\nqualify_retry_interval=%s\n\n",
			aorName(i), d, r.s.Frequency, secs(r.s.Timeout), r.s.Failures, secs(r.s.Retry))
		fmt.Fprintf(&list, "%d sip:%s 0 0\n", i/100+1, d)
	}
	fmt.Fprintf(&conf, "[edge]\ntype=sink\ndriver=kamailio\nurl=%s\n\n[hook]\ntype=sink\ndriver=webhook\nurl=http://%s/\n", r.kam, hook)
	for name, body := range map[string]string{"qualifyd.conf": conf.String(), "dispatcher.list": list.String()} {
		if err := os.WriteFile(filepath.Join(r.s.Dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("write lab file: %w", err)
		}
	}
	return nil
}

// start starts one process in the prober's namespace, its output to
// NAME.log and to fn line by line (fn may be nil).
func (r *blipRun) start(name string, fn func([]byte), argv ...string) error {
	f, err := os.Create(filepath.Join(r.s.Dir, name+".log"))
	if err != nil {
		return fmt.Errorf("log file: %w", err)
	}
	var out io.Writer = f
	if fn != nil {
		out = &lineWriter{log: f, fn: fn}
	}
	p, err := startProc(name, r.lab.nsP, out, argv...)
	if err != nil {
		return err
	}
	r.procs = append(r.procs, p)
	return nil
}

// startKamailio runs the kamailio.cfg of docs/routers.md with the dispatcher list of
// every destination, and waits until its RPC answers.
func (r *blipRun) startKamailio() error {
	rundir := filepath.Join(r.s.Dir, "kamailio")
	if err := os.MkdirAll(rundir, 0o755); err != nil {
		return fmt.Errorf("kamailio run dir: %w", err)
	}
	err := r.start("kamailio", nil, "kamailio", "-f", r.s.KamCfg, "-DD", "-E", "-w", rundir, "-Y", rundir,
		"-P", filepath.Join(rundir, "kamailio.pid"), "-M", "64",
		"-A", "LISTEN=udp:"+blipKamSIP, "-A", fmt.Sprintf("HTTP_PORT=%d", blipKamHTTP),
		"-A", fmt.Sprintf("DSLIST=%q", filepath.Join(r.s.Dir, "dispatcher.list")),
		"-A", fmt.Sprintf("CTLSOCK=%q", "unix:"+filepath.Join(rundir, "kamailio.ctl")))
	if err != nil {
		return err
	}
	for end := time.Now().Add(20 * time.Second); ; {
		if _, err := r.inactive(context.Background()); err == nil {
			return nil
		} else if time.Now().After(end) {
			return fmt.Errorf("kamailio's RPC did not answer within 20 s: %w", err)
		}
		sleepCtx(context.Background(), 200*time.Millisecond)
	}
}

// sinkLine is qualifyd's line for a confirmed change of the Kamailio
// sink's destination; panicLine its entry and exit lines.
var (
	sinkLine  = regexp.MustCompile(`^sink edge: host (\S+) is now (up|down) in the router$`)
	panicOpen = regexp.MustCompile(`^panic: `)
	panicOver = regexp.MustCompile(`^panic over: `)
)

// startQualifyd runs the daemon with JSON logs: the sink's confirmations
// and the panic's lines are recorded.
func (r *blipRun) startQualifyd() error {
	return r.start("qualifyd", r.qualifydLine, r.s.Qualifyd, "run", "--config", filepath.Join(r.s.Dir, "qualifyd.conf"),
		"--http", "", "--log-format", "json", "--sip-bind", fmt.Sprintf("%s:%d", proberIP, sipPort+10))
}

// qualifydLine records one JSON log line of qualifyd.
func (r *blipRun) qualifydLine(line []byte) {
	var l struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(line, &l) != nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch m := strings.TrimPrefix(l.Msg, "qualifyd: "); {
	case sinkLine.MatchString(m):
		g := sinkLine.FindStringSubmatch(m)
		r.kamTo = append(r.kamTo, stamped{at: now, key: g[1], down: g[2] == "down"})
	case panicOver.MatchString(m):
		r.panic = append(r.panic, stamped{at: now, key: "calm"})
	case panicOpen.MatchString(m):
		r.panic = append(r.panic, stamped{at: now, key: "panic"})
	}
}

// inactive reads Kamailio's dispatcher list and returns the destinations
// it holds inactive ("host:port").
func (r *blipRun) inactive(ctx context.Context) (map[string]bool, error) {
	body := `{"jsonrpc":"2.0","method":"dispatcher.list","id":1}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.kam, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := r.rpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Result struct {
			Records []struct {
				Set struct {
					Targets []struct {
						Dest struct{ URI, Flags string } `json:"DEST"`
					} `json:"TARGETS"`
				} `json:"SET"`
			} `json:"RECORDS"`
		} `json:"result"`
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&out); err != nil {
		return nil, fmt.Errorf("dispatcher.list: %w", err)
	}
	in := map[string]bool{}
	n := 0
	for _, rec := range out.Result.Records {
		for _, t := range rec.Set.Targets {
			n++
			if strings.HasPrefix(t.Dest.Flags, "I") {
				in[strings.TrimPrefix(t.Dest.URI, "sip:")] = true
			}
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("dispatcher.list: no destinations in %d bytes", len(raw))
	}
	return in, nil
}

// asBefore reports whether both routers hold exactly the dead ones down.
func (r *blipRun) asBefore(ctx context.Context) (bool, error) {
	in, err := r.inactive(ctx)
	if err != nil {
		return false, err
	}
	if len(in) != r.s.Dead {
		return false, nil
	}
	for d := range in {
		if !r.isDea[d] {
			return false, nil
		}
	}
	downs := r.hook.downs()
	if len(downs) != 2*r.s.Dead { // each dead AoR's contact and the AoR
		return false, nil
	}
	for i := len(r.dests) - r.s.Dead; i < len(r.dests); i++ {
		if !downs["contact "+aorName(i)] || !downs["aor "+aorName(i)] {
			return false, nil
		}
	}
	return true, nil
}

// awaitBefore waits until both routers hold the dead ones down and the
// others up, the state every blip must leave as it found.
func (r *blipRun) awaitBefore(ctx context.Context, limit time.Duration) error {
	end := time.Now().Add(limit)
	for {
		ok, err := r.asBefore(ctx)
		if ok {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("the routers did not settle within %v (last error: %v)", limit, err)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// runBlip takes qualifyd's link to the peers down for b, then watches
// until the routers are as before and Watch has passed, and counts what
// the sinks did from the blip's start.
func (r *blipRun) runBlip(ctx context.Context, b time.Duration, progress io.Writer) (blipRow, error) {
	row := blipRow{Blip: b, PanicAt: -1, CalmAt: -1}
	start := time.Now()
	if err := r.lab.impair(ctx, impairment{dead: true}, 0); err != nil {
		return row, err
	}
	fmt.Fprintf(progress, "%s blip of %v\n", stamp(start), b)
	if !sleepCtx(ctx, b) {
		return row, ctx.Err()
	}
	end := time.Now()
	if err := r.lab.impair(ctx, impairment{}, 1); err != nil {
		return row, err
	}
	last, err := r.watch(ctx, end, &row)
	if err != nil {
		return row, err
	}
	row.Settled = last.Sub(end)
	r.count(start, &row)
	fmt.Fprintf(progress, "%s as before %v after the blip's end\n", stamp(time.Now()), row.Settled.Round(10*time.Millisecond))
	return row, nil
}

// watch reads the routers every 250 ms from end until they are as before
// and Watch has passed, and returns when they were last seen otherwise
// (end if never). It gives up a minute after the watch.
func (r *blipRun) watch(ctx context.Context, end time.Time, row *blipRow) (time.Time, error) {
	last, until, limit := end, end.Add(r.s.Watch), end.Add(r.s.Watch+time.Minute)
	for {
		ok, err := r.asBefore(ctx)
		row.Polls++
		now := time.Now()
		if !ok {
			last = now
		}
		switch {
		case ok && now.After(until):
			return last, nil
		case now.After(limit):
			return last, fmt.Errorf("the routers were not as before a minute after the watch (last error: %v)", err)
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return last, ctx.Err()
		}
	}
}

// sleepCtx waits d or until ctx is done, and reports whether d elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// count fills row from what was recorded since start: the panic's times
// and every change of a destination up before the blip (down) or of a
// dead one (up), by the panic's phase.
func (r *blipRun) count(start time.Time, row *blipRow) {
	r.mu.Lock()
	var panicAt, calmAt time.Time
	for _, p := range r.panic {
		switch {
		case p.at.Before(start):
		case p.key == "panic" && panicAt.IsZero():
			panicAt = p.at
		case p.key == "calm" && !panicAt.IsZero() && calmAt.IsZero():
			calmAt = p.at
		}
	}
	kam := append([]stamped(nil), r.kamTo...)
	r.mu.Unlock()
	if !panicAt.IsZero() {
		row.PanicAt = panicAt.Sub(start)
	}
	if !calmAt.IsZero() {
		row.CalmAt = calmAt.Sub(start)
	}
	phase := func(t time.Time) int {
		switch {
		case panicAt.IsZero() || t.Before(panicAt):
			return 0
		case calmAt.IsZero() || t.Before(calmAt):
			return 1
		}
		return 2
	}
	// An up of a key down before the panic, before the panic's end, is
	// the take-back: during the blip nothing else brings a live
	// destination up. It may be recorded just before the panic's own
	// line, which another goroutine logs once the take-back is queued.
	// Without a panic nothing takes a down back: an up then is no
	// take-back, and the down stays counted.
	panicked := !panicAt.IsZero()
	falseBefore := map[string]bool{} // keys down before the panic, not taken back yet
	for _, k := range kam {
		switch {
		case k.at.Before(start):
		case k.down && !r.isDea[k.key]:
			row.FalseKamailio[phase(k.at)]++
			falseBefore[k.key] = phase(k.at) == 0
		case !k.down && r.isDea[k.key]:
			row.DeadUpKamailio++
		case !k.down && falseBefore[k.key] && panicked && phase(k.at) <= 1:
			row.TakenKamailio++
			falseBefore[k.key] = false
		}
	}
	firstDead := aorName(len(r.dests) - r.s.Dead)
	clear(falseBefore)
	for _, h := range r.hook.since(start) {
		_, name, _ := strings.Cut(h.key, " ")
		switch dead := name >= firstDead; {
		case h.down && !dead:
			row.FalseWebhook[phase(h.at)]++
			falseBefore[h.key] = phase(h.at) == 0
		case !h.down && dead:
			row.DeadUpWebhook++
		case !h.down && falseBefore[h.key] && panicked && phase(h.at) <= 1:
			row.TakenWebhook++
			falseBefore[h.key] = false
		}
	}
}

// printBlip writes the rows as the table docs/performance.md shows.
func printBlip(w io.Writer, s blipSettings, rows []blipRow) {
	fmt.Fprintf(w, "%d AoRs, each its own destination, %d really dead; F %d s, T %v, N %d, R %v; Kamailio dispatcher and a webhook receiver as sinks\n",
		s.AoRs, s.Dead, s.Frequency, s.Timeout, s.Failures, s.Retry)
	fmt.Fprintf(w, "%6s  %15s  %24s  %24s  %14s  %14s  %12s\n", "BLIP", "PANIC", "FALSE DOWNS KAMAILIO", "FALSE DOWNS WEBHOOK", "TAKEN BACK K/W", "DEAD UPS K/W", "AS BEFORE")
	fmt.Fprintf(w, "%6s  %15s  %24s  %24s  %14s  %14s  %12s\n", "", "from..to", "before/during/after", "before/during/after", "by the panic", "", "after end")
	for _, r := range rows {
		fmt.Fprintf(w, "%6s  %15s  %24s  %24s  %14s  %14s  %12s\n", r.Blip,
			fmt.Sprintf("%s..%s", secsOr(r.PanicAt), secsOr(r.CalmAt)),
			fmt.Sprintf("%d/%d/%d", r.FalseKamailio[0], r.FalseKamailio[1], r.FalseKamailio[2]),
			fmt.Sprintf("%d/%d/%d", r.FalseWebhook[0], r.FalseWebhook[1], r.FalseWebhook[2]),
			fmt.Sprintf("%d/%d", r.TakenKamailio, r.TakenWebhook),
			fmt.Sprintf("%d/%d", r.DeadUpKamailio, r.DeadUpWebhook), fmt.Sprintf("%.2f s", r.Settled.Seconds()))
	}
}

// secsOr writes d as "+6.1s", or "never" when negative.
func secsOr(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("+%.1fs", d.Seconds())
}

// falseDowns is every count of the row that must be 0: the dead pushed
// up, and the live pushed down but for those of the blip's own event that
// the panic took back when it began (qualify-semantics §6.1).
func (r blipRow) falseDowns() int {
	n := r.DeadUpKamailio + r.DeadUpWebhook - r.TakenKamailio - r.TakenWebhook
	for i := range 3 {
		n += r.FalseKamailio[i] + r.FalseWebhook[i]
	}
	return n
}
