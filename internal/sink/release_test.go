package sink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// batchDriver is a fakeDriver that is a batcher: it records each batch's
// objects, in the order given.
type batchDriver struct {
	fakeDriver
	batches [][]Object
}

func (b *batchDriver) pushBatch(ctx context.Context, objs []Object, errs []error) {
	b.mu.Lock()
	b.batches = append(b.batches, slices.Clone(objs))
	b.mu.Unlock()
	for i, o := range objs {
		errs[i] = b.push(ctx, o)
	}
}

// TestReleaseSendsDownsFirst: a release pushes the objects wanted Down
// (or confirmed Down) before the others, one at a time through a plain
// driver and in the first batch through a batcher, and counts them.
func TestReleaseSendsDownsFirst(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched=", batched), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &batchDriver{}
				var drv driver = &b.fakeDriver
				if batched {
					drv = b
				}
				r := newReconciler("x", drv, Intervals{}, nil, half)
				for i := range 300 {
					l := Unknown
					if i%15 == 7 {
						l = Down
					}
					r.Set(key(fmt.Sprintf("o%03d", i)), l, 0)
				}
				released, failed, downs := r.release(t.Context(), true)
				if released != 300 || failed != 0 || downs != 20 {
					t.Fatalf("released %d, failed %d, downs %d; want 300, 0, 20", released, failed, downs)
				}
				for i, o := range b.pushes {
					n := 0
					fmt.Sscanf(o.Name, "o%d", &n)
					if first := n%15 == 7; first != (i < 20) || o.Level != Up || !o.Retire {
						t.Fatalf("push %d: %+v; want the 20 downs first, each up and retired", i, o)
					}
				}
				if batched && (len(b.batches) != 2 || len(b.batches[0]) != maxBatch) {
					t.Fatalf("%d batches, want 2 (%d, then the rest)", len(b.batches), maxBatch)
				}
			})
		})
	}
}

// TestWebhookReleaseIsConcurrentAndBounded: a webhook's release has
// inFlight POSTs in flight at once, never more: the receiver holds every
// request until inFlight of them wait together (a release one POST at a
// time would never get there, and end at its timeout with nothing
// confirmed), and the saved downs are sent in the first window (their
// order within it is the receiver's).
func TestWebhookReleaseIsConcurrentAndBounded(t *testing.T) {
	var mu sync.Mutex
	var now, most int
	var order []string
	full := make(chan struct{})
	var fill sync.Once // the window may be full again after it opened
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c Change
		json.NewDecoder(r.Body).Decode(&c)
		mu.Lock()
		now++
		most = max(most, now)
		order = append(order, c.AoR)
		if now == inFlight && most == inFlight {
			fill.Do(func() { close(full) })
		}
		mu.Unlock()
		select {
		case <-full:
		case <-r.Context().Done():
		}
		mu.Lock()
		now--
		mu.Unlock()
	}))
	defer hook.Close()
	conf, saved := releaseConf(100, 5, "webhook", hook.URL)
	out, err := Release(t.Context(), conf, nil, Config{Source: saved})
	if err != nil || len(out) != 1 || out[0].Err != nil || out[0].Released != 200 || out[0].Downs != 10 {
		t.Fatalf("release %+v, %v; want 200 released (100 AoRs and their contacts), 10 down first", out, err)
	}
	if most != inFlight {
		t.Fatalf("at most %d POSTs in flight, want %d", most, inFlight)
	}
	for i, aor := range order {
		if strings.HasPrefix(aor, "dead") && i >= inFlight {
			t.Fatalf("POST %d is of %s; want the 10 saved downs' bodies in the first window of %d: %q", i, aor, inFlight, order)
		}
	}
}

// releaseConf is a configuration of n AoRs of one contact each, the
// first downs of them named dead*, with one sink of driver at url (a
// contact and an AoR per AoR for a webhook), and the saved levels that
// have the dead ones Unreachable and the others Reachable.
func releaseConf(n, downs int, driver, url string) (*pjsip.Config, Source) {
	on := &qualify.Policy{Frequency: time.Minute}
	conf := &pjsip.Config{Sinks: []*pjsip.Sink{{Name: "s", Driver: driver, URL: url, Timeout: 5 * time.Second}}}
	var saved []engine.Saved
	for i := range n {
		name, st := fmt.Sprintf("live%03d", i), qualify.Reachable
		if i < downs {
			name, st = fmt.Sprintf("dead%03d", i), qualify.Unreachable
		}
		uri := fmt.Sprintf("sip:%s@192.0.2.%d", name, i%250+1)
		conf.AoRs = append(conf.AoRs, pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{uri}, Policy: on}})
		saved = append(saved, engine.Saved{AoR: name, URI: uri, Policy: on, State: qualify.State{Status: st}})
	}
	return conf, NewSaved(saved)
}

// TestAMIReleasePipelines: an AMI release writes its actions a window at
// a time and matches each reply by ActionID, with events and replies to
// other actions in between and every reply written a byte at a time: every
// device ends NOT_INUSE, the saved downs' first.
func TestAMIReleasePipelines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFakeManager("s3cret")
		f.split, f.noisy = true, true
		var order []string
		f.onSetvar = func(variable, _ string) { order = append(order, variable) }
		r := newReconciler("pbx", newAMI(f, "s3cret", true), Intervals{}, nil, half)
		for i := range 40 {
			l := Up
			if i%10 == 3 {
				l = Down
			}
			r.Set(Key{Kind: KindDevice, Name: fmt.Sprintf("d%02d", i)}, l, 0)
		}
		released, failed, downs := r.release(t.Context(), true)
		if released != 40 || failed != 0 || downs != 4 {
			t.Fatalf("released %d, failed %d, downs %d; want 40, 0, 4", released, failed, downs)
		}
		for i, v := range order {
			if down := v[len(v)-2] == '3'; down != (i < 4) || f.vars[v] != "NOT_INUSE" {
				t.Fatalf("Setvar %d: %s = %s; want the 4 downs first, each NOT_INUSE: %q", i, v, f.vars[v], order)
			}
		}
		if len(order) != 40 {
			t.Fatalf("%d Setvars, want 40", len(order))
		}
	})
}
