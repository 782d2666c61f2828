package sink

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// TestWatchersFollowReloads: an ami sink with observe_calls=yes gets a
// Manager session of its own logged in with Events: call (the fake
// refuses any other), which a reload
// that turns the option off ends and one that turns it on again starts
// anew; a sink without it gets none.
func TestWatchersFollowReloads(t *testing.T) {
	f := newFakeManager("s3cret")
	f.events = "call"
	w := NewWatchers(&recorder{}, f.dial, nil)
	def := func(name string, on bool) *pjsip.Sink {
		return &pjsip.Sink{Name: name, Driver: "ami", Address: "127.0.0.1:5038", Username: "qualifyd", Secret: "s3cret",
			Auth: "md5", Timeout: time.Second, ObserveCalls: on}
	}
	conf := func(on bool) *pjsip.Config {
		c := legsConf()
		c.Sinks = []*pjsip.Sink{def("asterisk", on), def("other", false)}
		return c
	}
	w.Configure(conf(true))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	up := func() bool { s, ok := w.Stats()["asterisk"]; return ok && s.Up }
	waitFor(t, "the calls' session logs in", up)
	if len(w.Stats()) != 1 {
		t.Fatalf("watchers %v, want asterisk's only", w.Stats())
	}
	w.Configure(conf(false))
	if len(w.Stats()) != 0 {
		t.Fatalf("watchers %v after observe_calls=no", w.Stats())
	}
	w.Configure(conf(true))
	waitFor(t, "the calls' session logs in again", up)
	cancel()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	logins := 0
	for _, a := range f.actions {
		if a["Action"] == "Login" {
			logins++
		}
	}
	if logins != 2 {
		t.Errorf("%d logins, want 2", logins)
	}
}

// TestWatchersCountReconnects: a call watcher whose Manager cannot be
// reached is not up, keeps the error, and counts each failed session,
// the next after the backoff (1 s ±20%).
func TestWatchersCountReconnects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refuse := func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("connection refused") }
		w := NewWatchers(&recorder{}, refuse, nil)
		conf := legsConf()
		conf.Sinks = []*pjsip.Sink{{Name: "asterisk", Driver: "ami", Address: "127.0.0.1:5038", Username: "qualifyd", Secret: "s3cret",
			Auth: "md5", Timeout: time.Second, ObserveCalls: true}}
		w.Configure(conf)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		for want := uint64(1); want <= 2; want++ {
			synctest.Wait()
			if s := w.Stats()["asterisk"]; s.Up || s.Reconnects != want || !strings.Contains(s.LastError, "connection refused") {
				t.Fatalf("watcher %+v, want %d reconnects", s, want)
			}
			time.Sleep(1200 * time.Millisecond)
		}
		cancel()
		<-done
	})
}
