package sink

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// receiver is a webhook receiver that verifies signatures and answers
// the statuses queued in codes (200 when empty).
type receiver struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	codes  []int
	got    chan Change   // every delivered (2xx) change
	tried  chan int      // every answered status
	hold   chan struct{} // if set, each request waits for it
}

// direct is a transport that serves requests with h in the test's own
// goroutines, so that the sink and its receiver run in one synctest
// bubble, in virtual time.
type direct struct{ h http.Handler }

func (d direct) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	d.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

func newDirect(t *testing.T, secret string, codes ...int) (*receiver, *Webhook) {
	rc := &receiver{t: t, secret: secret, codes: codes, got: make(chan Change, 64), tried: make(chan int, 64)}
	return rc, &Webhook{URL: "http://receiver/hook", Secret: secret, Timeout: 5 * time.Second, Client: &http.Client{Transport: direct{rc}}}
}

func newReceiver(t *testing.T, secret string, codes ...int) (*receiver, *httptest.Server) {
	rc := &receiver{t: t, secret: secret, codes: codes, got: make(chan Change, 64), tried: make(chan int, 64)}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	return rc, srv
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig := ""
	if rc.secret != "" {
		sig = Sign(rc.secret, body)
	}
	if r.Header.Get("Content-Type") != "application/json" || r.Header.Get(SignatureHeader) != sig {
		rc.t.Errorf("bad request: %v %s", r.Header, body)
	}
	if rc.hold != nil {
		<-rc.hold
	}
	rc.mu.Lock()
	code := 200
	if len(rc.codes) > 0 {
		code, rc.codes = rc.codes[0], rc.codes[1:]
	}
	rc.mu.Unlock()
	w.WriteHeader(code)
	rc.tried <- code
	if code == 200 {
		var c Change
		if err := json.Unmarshal(body, &c); err != nil {
			rc.t.Error(err)
		}
		rc.got <- c
	}
}

func runWebhook(t *testing.T, w *Webhook) *Reconciler {
	r := newReconciler("alerts", w, Intervals{}, nil, half)
	r.reasserts = false
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func TestWebhookDeliversSignedChangesInOrder(t *testing.T) {
	rc, srv := newReceiver(t, "k3y")
	r := runWebhook(t, &Webhook{URL: srv.URL, Secret: "k3y", Timeout: 5 * time.Second})
	c := Key{Kind: KindContact, Name: "pbx07", URI: "sip:192.0.2.7"}
	r.Set(c, Down, qualify.ReasonTimeout)
	first := <-rc.got
	r.Set(c, Up, 0)
	second := <-rc.got
	if first.Kind != "contact" || first.AoR != "pbx07" || first.URI != "sip:192.0.2.7" || first.From != "" ||
		first.To != "down" || first.Reason != "timeout" || first.Time.IsZero() {
		t.Fatalf("first %+v", first)
	}
	if second.Seq <= first.Seq || second.From != "down" || second.To != "up" || second.Reason != "" {
		t.Fatalf("second %+v after %+v", second, first)
	}
	r.Keys(func(Key) bool { return false })
	if gone := <-rc.got; gone.To != "removed" || gone.From != "up" {
		t.Fatalf("removal %+v", gone)
	}
}

func TestWebhookRetries5xxAndDrops4xx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newDirect(t, "", 503, 500, 200, 404)
		r := newReconciler("alerts", w, Intervals{}, nil, half)
		r.reasserts = false
		stop := start(t, r)
		defer stop()
		t0 := time.Now()
		r.Set(Key{Kind: KindAoR, Name: "pbx07"}, Down, 0)
		synctest.Wait()
		time.Sleep(3 * time.Second) // backoff 1 s, then 2 s
		synctest.Wait()
		if got := drain(rc.tried); len(got) != 3 || got[2] != 200 {
			t.Fatalf("statuses %v in %v", got, time.Since(t0))
		}
		if c := <-rc.got; c.AoR != "pbx07" || c.To != "down" {
			t.Fatalf("delivered %+v", c)
		}
		r.Set(Key{Kind: KindEndpoint, Name: "pbx07"}, Down, 0)
		r.Set(Key{Kind: KindAoR, Name: "pbx08"}, Up, 0) // after the drop, deliveries go on
		synctest.Wait()
		if c := <-rc.got; c.AoR != "pbx08" {
			t.Fatalf("delivered %+v", c)
		}
		s := r.Stats()
		if s.OK != 2 || s.Dropped != 1 || s.Pending != 0 || s.LastError != `webhook: HTTP 404 Not Found: ""` {
			t.Fatalf("stats %+v", s)
		}
	})
}

func drain(c chan int) []int {
	var out []int
	for len(c) > 0 {
		out = append(out, <-c)
	}
	return out
}

func TestWebhookCoalescesWhileTheReceiverIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rc, w := newDirect(t, "", 503)
		rc.hold = make(chan struct{})
		r := newReconciler("alerts", w, Intervals{}, nil, half)
		r.reasserts = false
		stop := start(t, r)
		defer stop()
		k := Key{Kind: KindAoR, Name: "pbx07"}
		r.Set(k, Down, 0)
		synctest.Wait() // the first POST waits in the receiver
		for range 1000 {
			r.Set(k, Up, 0)
			r.Set(k, Down, 0)
		}
		r.Set(k, Up, 0)
		close(rc.hold)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := drain(rc.tried); len(got) != 2 || got[0] != 503 {
			t.Fatalf("statuses %v", got)
		}
		c := <-rc.got
		if c.To != "up" || c.From != "" || c.Seq != 2002 {
			t.Fatalf("delivered %+v: want the latest change only", c)
		}
		if s := r.Stats(); s.OK != 1 || s.Pending != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// TestWebhookMarksThePanicsUp: an up pushed in place of a down says so.
func TestWebhookMarksThePanicsUp(t *testing.T) {
	o := Object{Key: Key{Kind: KindAoR, Name: "pbx07"}, Level: Up, From: Down, Held: true, Seq: 9, Time: time.Unix(0, 0)}
	b, _ := json.Marshal(change(o))
	if want := `{"seq":9,"time":"1970-01-01T00:00:00Z","kind":"aor","aor":"pbx07","from":"down","to":"up","panic":true,`; !strings.HasPrefix(string(b), want) {
		t.Fatalf("payload %s, want it to start %s", b, want)
	}
}
