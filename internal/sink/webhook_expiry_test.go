package sink

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// body is any webhook body as the README's receiver reads it.
type body struct {
	Kind     string    `json:"kind"`
	AoR      string    `json:"aor"`
	URI      string    `json:"uri"`
	Endpoint string    `json:"endpoint"`
	To       string    `json:"to"`
	Time     time.Time `json:"time"`
	Expires  time.Time `json:"expires"`
}

// staleReceiver is the README's receiver: it keeps the downs it was told
// of and the latest expires of any body, and treats every down as up
// once that expires has passed. It records each body with its arrival
// time, and refuses heartbeats with beatCode when that is set.
type staleReceiver struct {
	t        *testing.T
	secret   string
	beatCode int

	mu      sync.Mutex
	down    map[string]bool
	expires time.Time
	bodies  []body
	arrived []time.Time
}

func newStaleReceiver(t *testing.T, secret string) (*staleReceiver, *Webhook) {
	rc := &staleReceiver{t: t, secret: secret, down: map[string]bool{}}
	return rc, &Webhook{URL: "http://receiver/hook", Secret: secret, Timeout: 5 * time.Second,
		FailOpenAfter: 30 * time.Second, Client: &http.Client{Transport: direct{rc}}}
}

func (rc *staleReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var b body
	if err := json.Unmarshal(raw, &b); err != nil || r.Header.Get(SignatureHeader) != Sign(rc.secret, raw) {
		rc.t.Errorf("bad body %s (%v)", raw, err)
		w.WriteHeader(http.StatusForbidden)
		return
	}
	if !strings.Contains(string(raw), `"expires":"`) {
		rc.t.Errorf("body without expires: %s", raw)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.bodies, rc.arrived = append(rc.bodies, b), append(rc.arrived, time.Now())
	if b.Kind == "heartbeat" && rc.beatCode != 0 {
		w.WriteHeader(rc.beatCode)
		return
	}
	if b.Expires.After(rc.expires) {
		rc.expires = b.Expires
	}
	if b.Kind != "heartbeat" {
		rc.down[b.Kind+"/"+b.AoR+"/"+b.URI+"/"+b.Endpoint] = b.To == "down"
	}
}

// isDown is the receiver's verdict of a contact at now.
func (rc *staleReceiver) isDown(aor, uri string, now time.Time) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.down["contact/"+aor+"/"+uri+"/"] && now.Before(rc.expires)
}

// beats returns the arrival times of the heartbeats.
func (rc *staleReceiver) beats() []time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []time.Time
	for i, b := range rc.bodies {
		if b.Kind == "heartbeat" {
			out = append(out, rc.arrived[i])
		}
	}
	return out
}

func webhookReconciler(w *Webhook, beat time.Duration, notice func(slog.Level, string, ...slog.Attr)) *Reconciler {
	r := newReconciler("alerts", w, Intervals{Heartbeat: beat}, notice, half)
	r.reasserts = false
	return r
}

// TestWebhookBodiesCarryExpires: a change and a heartbeat each say that
// the verdicts expire failopen_after after the POST.
func TestWebhookBodiesCarryExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newStaleReceiver(t, "k3y")
		r := webhookReconciler(w, 10*time.Second, nil)
		stop := start(t, r)
		defer stop()
		synctest.Wait() // the heartbeat at start
		time.Sleep(5 * time.Second)
		r.Set(Key{Kind: KindContact, Name: "pbx07", URI: "sip:192.0.2.7"}, Down, qualify.ReasonTimeout)
		synctest.Wait()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.bodies) != 2 {
			t.Fatalf("bodies %+v", rc.bodies)
		}
		for i, b := range rc.bodies {
			if want := rc.arrived[i].Add(30 * time.Second); !b.Expires.Equal(want) || b.Expires.Location() != time.UTC {
				t.Errorf("body %d (%s): expires %v, want %v (30 s after the POST, UTC)", i, b.Kind, b.Expires, want)
			}
		}
		if b := rc.bodies[0]; b.Kind != "heartbeat" || !b.Time.Equal(rc.arrived[0]) {
			t.Errorf("first body %+v, want a heartbeat sent at %v", b, rc.arrived[0])
		}
		if b := rc.bodies[1]; b.Kind != "contact" || b.To != "down" {
			t.Errorf("second body %+v, want the change", b)
		}
	})
}

// TestWebhookHeartbeatsEveryInterval: a heartbeat at start, then one
// every heartbeat_interval.
func TestWebhookHeartbeatsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newStaleReceiver(t, "k3y")
		r := webhookReconciler(w, 10*time.Second, nil)
		t0 := time.Now()
		stop := start(t, r)
		time.Sleep(65 * time.Second)
		stop()
		got := rc.beats()
		if len(got) != 7 {
			t.Fatalf("%d heartbeats in 65 s: %v", len(got), got)
		}
		for i, at := range got {
			if d := at.Sub(t0); d != time.Duration(i)*10*time.Second {
				t.Errorf("heartbeat %d at %v, want %v", i, d, time.Duration(i)*10*time.Second)
			}
		}
	})
}

// TestWebhookReceiverDownGoesStale: a receiver that follows the README's
// rule holds a down while qualifyd heartbeats, however long, and treats it
// as up failopen_after after the last heartbeat once qualifyd stops.
func TestWebhookReceiverDownGoesStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newStaleReceiver(t, "k3y")
		r := webhookReconciler(w, 10*time.Second, nil)
		stop := start(t, r)
		r.Set(Key{Kind: KindContact, Name: "pbx07", URI: "sip:192.0.2.7"}, Down, qualify.ReasonTimeout)
		for range 12 { // two minutes, far past one failopen_after
			synctest.Wait()
			if !rc.isDown("pbx07", "sip:192.0.2.7", time.Now()) {
				t.Fatalf("at %v: the down went stale while qualifyd runs", time.Now())
			}
			time.Sleep(10 * time.Second)
		}
		time.Sleep(5 * time.Second)
		stop() // qualifyd gone: no more heartbeats
		beats := rc.beats()
		last := beats[len(beats)-1]
		if !rc.isDown("pbx07", "sip:192.0.2.7", last.Add(30*time.Second-time.Nanosecond)) {
			t.Errorf("stale before failopen_after after the last heartbeat (%v)", last)
		}
		if rc.isDown("pbx07", "sip:192.0.2.7", last.Add(30*time.Second)) {
			t.Errorf("still down failopen_after after the last heartbeat (%v)", last)
		}
	})
}

// TestWebhookRefusedHeartbeatKeepsDelivering: a receiver that answers
// heartbeats with a 4xx still gets the changes; the refusal is logged.
func TestWebhookRefusedHeartbeatKeepsDelivering(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newStaleReceiver(t, "k3y")
		rc.beatCode = http.StatusBadRequest
		var mu sync.Mutex
		var lines []string
		r := webhookReconciler(w, 10*time.Second, func(_ slog.Level, msg string, _ ...slog.Attr) {
			mu.Lock()
			lines = append(lines, msg)
			mu.Unlock()
		})
		stop := start(t, r)
		defer stop()
		r.Set(Key{Kind: KindContact, Name: "pbx07", URI: "sip:192.0.2.7"}, Down, qualify.ReasonTimeout)
		synctest.Wait()
		if !rc.isDown("pbx07", "sip:192.0.2.7", time.Now()) {
			t.Fatal("the change after a refused heartbeat was not delivered")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(lines) != 1 || lines[0] != `sink alerts: heartbeat: webhook: HTTP 400 Bad Request: ""` {
			t.Errorf("log %q", lines)
		}
	})
}

// TestWebhookSinkTakesItsHeartbeatOptions: a webhook sink's reconciler
// heartbeats every heartbeat_interval, its bodies expire failopen_after
// after the POST, and it does not reassert.
func TestWebhookSinkTakesItsHeartbeatOptions(t *testing.T) {
	def := &pjsip.Sink{Name: "alerts", Driver: "webhook", URL: "http://receiver/hook", Timeout: 5 * time.Second,
		ReassertInterval: time.Minute, HeartbeatInterval: 7 * time.Second, FailOpenAfter: 21 * time.Second}
	r := NewGroup(Config{}).reconciler(def)
	w, ok := r.drv.(*Webhook)
	if !ok || r.iv != (Intervals{Heartbeat: 7 * time.Second}) || w.FailOpenAfter != 21*time.Second || r.reasserts {
		t.Fatalf("intervals %+v, driver %#v, reasserts %v", r.iv, r.drv, r.reasserts)
	}
}
