package daemon

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/state"
)

// TestAPIReloadDuringShutdown: an API reload still reading its
// configuration when the daemon stops (past the HTTP front's graceful
// bound) applies nothing after the state file's last write: it either
// applied before (and the file holds its AoR) or is refused.
func TestAPIReloadDuringShutdown(t *testing.T) {
	conf := deadTrunk(t)
	late := *conf
	late.AoRs = append(slices.Clone(conf.AoRs), pjsip.AoR{AoR: probe.AoR{Name: "late",
		Contacts: []string{"sip:late@" + conf.AoRs[0].Contacts[0][len("sip:dead@"):]}, Policy: conf.AoRs[0].Policy}})
	loading, release := make(chan struct{}), make(chan struct{})
	loads := 0
	load := func() (*pjsip.Config, error) {
		if loads++; loads == 1 {
			return conf, nil
		}
		close(loading) // the API's reload, in its handler
		<-release
		return &late, nil
	}
	n := &notices{more: make(chan struct{}, 1)}
	path := filepath.Join(t.TempDir(), "state")
	d, err := New(Config{Load: load, SIPBind: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", StateFile: path, Notify: n.add})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	n.waitFor(t, "READY=1\nSTATUS=qualifying 1 contacts of 1 AoRs")
	reloaded := make(chan int, 1)
	go func() {
		resp, err := http.Post(d.http.URL()+"/api/v1/reload", "", nil)
		if err != nil {
			reloaded <- 0
			return
		}
		resp.Body.Close()
		reloaded <- resp.StatusCode
	}()
	<-loading
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute): // only ends a hung run
		t.Fatal("Run still running a minute after its stop")
	}
	close(release) // the reload's configuration arrives after Run returned
	code := <-reloaded
	f, err := state.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	saved := slices.ContainsFunc(f.Contacts, func(c engine.Saved) bool { return c.AoR == "late" })
	if code == http.StatusOK && !saved {
		t.Fatal("the API's reload applied after the state file's last write: its AoR is running but not saved")
	}
	t.Logf("reload answered %d, its AoR saved: %v", code, saved)
}
