package daemon

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/endpoint"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/state"
)

// lockedBuffer is a log sink safe for the daemon's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deadTrunk is an endpoint "trunk" on an AoR whose one contact is a
// loopback port nobody answers on.
func deadTrunk(t *testing.T) *pjsip.Config {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // held, never read: probes time out
	policy := &qualify.Policy{Frequency: 60 * time.Second, Timeout: 200 * time.Millisecond}
	return &pjsip.Config{
		AoRs:      []pjsip.AoR{{AoR: probe.AoR{Name: "dead", Contacts: []string{"sip:dead@" + c.LocalAddr().String()}, Policy: policy}}},
		Endpoints: []pjsip.Endpoint{{Name: "trunk", AoRs: []string{"dead"}}},
	}
}

// runUntilDown runs a daemon on conf with the state file path, first
// probes at rand's fraction of F, until the endpoint goes unavailable,
// then stops it and returns it.
func runUntilDown(t *testing.T, conf *pjsip.Config, path string, rand float64, log *lockedBuffer) *Daemon {
	t.Helper()
	down := make(chan struct{}, 1)
	d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", StateFile: path,
		Rand: func() float64 { return rand }, Log: log,
		EndpointChanged: func(c endpoint.Change) {
			if !c.Available {
				down <- struct{}{}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	<-down
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return d
}

// TestStateAcrossRestart: a daemon stopped with its trunk Unreachable
// leaves a state file; the next one, started on it, has the trunk
// Unreachable and its endpoint unavailable before its own first probe
// (due only at 0.99 F), with the old process's last result (to the
// microsecond the file keeps), statistics and history, logs the
// contact's line once, and numbers
// its events on from the old process's last one (qualify-semantics §8).
// The endpoint's log view starts offline, so it prints no line, as in
// the first run (§10).
func TestStateAcrossRestart(t *testing.T) {
	conf := deadTrunk(t)
	path := filepath.Join(t.TempDir(), "state")
	var log1, log2 lockedBuffer
	d1 := runUntilDown(t, conf, path, 0, &log1)
	was, _ := d1.Engine().AoR("dead")
	if was.Contacts[0].Status != qualify.Unreachable {
		t.Fatalf("first run ended with %+v", was.Contacts[0])
	}
	last := d1.Engine().Seq()
	if last < engine.StartSeq(time.Now().Add(-time.Minute)) {
		t.Fatalf("first run's last event %d: not numbered from its start time", last)
	}

	d2 := runUntilDown(t, conf, path, 0.99, &log2)
	got, _ := d2.Engine().AoR("dead")
	c := got.Contacts[0]
	if c.Status != qualify.Unreachable || got.Available || !c.Last.At.Equal(was.Contacts[0].Last.At.Truncate(time.Microsecond)) || c.Last.Reason != qualify.ReasonTimeout {
		t.Fatalf("restored %+v, was %+v", got, was)
	}
	if c.Stats.Probes != 1 || c.Stats.Failures != 1 || c.Stats != was.Contacts[0].Stats {
		t.Fatalf("restored statistics %+v, were %+v", c.Stats, was.Contacts[0].Stats)
	}
	h1, _ := d1.Engine().History("dead")
	h2, ok := d2.Engine().History("dead")
	if !ok || len(h1.Changes) != 1 || len(h2.Changes) != 1 || !h2.Changes[0].Time.Equal(h1.Changes[0].Time.Truncate(time.Microsecond)) ||
		h2.Changes[0].To != qualify.Unreachable || h2.Buckets[0].Failures != 1 {
		t.Fatalf("restored history %+v, was %+v", h2, h1)
	}
	if f, err := state.Read(path); err != nil || len(f.Histories) != 0 || len(f.Contacts) != 1 {
		t.Fatalf("state file: %v, want one contact and no history", err)
	}
	if f, err := state.Read(path + ".history"); err != nil || len(f.Histories) != 1 || len(f.Contacts) != 0 {
		t.Fatalf("history file: %v, want one history and no contact", err)
	}
	if n := d2.Engine().Counters().Probes; n != [qualify.NumReasons]uint64{} {
		t.Fatalf("the second run probed before the check: %v", n)
	}
	if seq := d2.Engine().Seq(); seq != last+2 {
		t.Fatalf("second run's events end at %d, want %d+2 (status and availability)", seq, last)
	}
	out := log2.String()
	if strings.Contains(out, "Endpoint trunk") {
		t.Errorf("second run logged an endpoint line:\n%s", out)
	}
	for _, want := range []string{"state restored state_file=" + path + " restored=1 changed=0 stale=0 histories=1",
		"Contact dead/" + conf.AoRs[0].Contacts[0] + " is now Unreachable."} {
		if !strings.Contains(out, want) {
			t.Errorf("second run's log lacks %q:\n%s", want, out)
		}
	}
}

// TestStateFileIgnored: a corrupt or foreign state file, or none, is
// logged and the daemon starts without it, numbering its events from its
// start time.
func TestStateFileIgnored(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"corrupt": "qfydstat\x01\x00garbage", "foreign": "[global]\n", "missing": ""} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if content != "" {
				if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var log lockedBuffer
			before := engine.StartSeq(time.Now())
			d, err := New(Config{Load: func() (*pjsip.Config, error) { return pbx07(), nil }, SIPBind: "127.0.0.1:0", StateFile: path, Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			defer d.prober.Close()
			defer d.closeLogs()
			synced(t, d)
			want := map[string]string{"corrupt": "state file ignored: state file " + path + ": truncated or corrupt state file",
				"foreign": "state file ignored: state file " + path + ": not a qualifyd state file", "missing": "no state file yet"}[name]
			if !strings.Contains(log.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, log.String())
			}
			if seq := d.Engine().Seq(); seq < before {
				t.Errorf("events start after %d, before the start time %d", seq, before)
			}
		})
	}
}

// TestHistoryFileIgnored: a damaged history file costs the histories
// only; the contacts are restored from the state file.
func TestHistoryFileIgnored(t *testing.T) {
	conf := deadTrunk(t)
	path := filepath.Join(t.TempDir(), "state")
	var log1, log2 lockedBuffer
	runUntilDown(t, conf, path, 0, &log1)
	if err := os.WriteFile(path+".history", []byte("qfydstat\x02\x00garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := runUntilDown(t, conf, path, 0.99, &log2)
	if got, _ := d.Engine().AoR("dead"); got.Contacts[0].Status != qualify.Unreachable || got.Contacts[0].Stats.Probes != 1 {
		t.Fatalf("contact not restored: %+v", got.Contacts[0])
	}
	h, _ := d.Engine().History("dead")
	for _, b := range h.Buckets {
		if b.Probes != 0 { // the second run has not probed: this is the first run's
			t.Fatalf("history restored from a damaged file: %+v", h.Buckets)
		}
	}
	out := log2.String()
	for _, want := range []string{"history file ignored: state file " + path + ".history: truncated or corrupt state file",
		"restored=1 changed=0 stale=0 histories=0"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
}

// TestStateMark: a state file last written 20 minutes ago (more than 10
// F) is restored when its mark file says the daemon that wrote it was
// running seconds ago, as after a crash of a daemon whose contacts did
// not change; without the mark, or with a damaged one (logged), its
// states are stale.
func TestStateMark(t *testing.T) {
	conf := deadTrunk(t)
	path := filepath.Join(t.TempDir(), "state")
	runUntilDown(t, conf, path, 0, &lockedBuffer{})
	f, err := state.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-20 * time.Minute)
	f.Contacts[0].Last.At = old
	if _, err := state.Write(path, state.Header{Written: old, Seq: f.Seq}, slices.Values([][]engine.Saved{f.Contacts}), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, mark, want string
		status           qualify.Status
	}{
		{"vouched", string(state.EncodeMark(state.Mark{Of: old, At: time.Now().Add(-5 * time.Second)})), "restored=1 changed=0 stale=0", qualify.Unreachable},
		{"of another file", string(state.EncodeMark(state.Mark{Of: old.Add(time.Second), At: time.Now()})), "restored=0 changed=0 stale=1", qualify.NonQualified},
		{"damaged", "qfydmark\x01\x00garbage", "mark file ignored: mark file " + path + ".mark: truncated or corrupt state file", qualify.NonQualified},
		{"none", "", "restored=0 changed=0 stale=1", qualify.NonQualified},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(path + state.MarkSuffix)
			if c.mark != "" {
				if err := os.WriteFile(path+state.MarkSuffix, []byte(c.mark), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var log lockedBuffer
			d, err := New(Config{Load: func() (*pjsip.Config, error) { return conf, nil }, SIPBind: "127.0.0.1:0", StateFile: path, Log: &log})
			if err != nil {
				t.Fatal(err)
			}
			defer d.prober.Close()
			d.restoreState()
			if a, _ := d.Engine().AoR("dead"); a.Contacts[0].Status != c.status {
				t.Errorf("restored %v, want %v", a.Contacts[0].Status, c.status)
			}
			synced(t, d)
			if !strings.Contains(log.String(), c.want) {
				t.Errorf("log lacks %q:\n%s", c.want, log.String())
			}
		})
	}
}
