package sink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// router is a fake router that is down (refuses connections, answers no
// probe) until up, and once up refuses logins while refuse is set.
type router struct {
	mu       sync.Mutex
	up       bool
	refuse   bool
	connects []time.Time
	probes   int
	pushed   time.Time // the first push
}

var errRefused = errors.New("connect: connection refused")

func (f *router) connect(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects = append(f.connects, time.Now())
	switch {
	case !f.up:
		return errRefused
	case f.refuse:
		return errors.New("login: Authentication failed")
	}
	return nil
}

func (f *router) alive(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probes++
	if !f.up {
		return errRefused
	}
	return nil
}

func (f *router) push(context.Context, Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pushed.IsZero() {
		f.pushed = time.Now()
	}
	return nil
}

func (f *router) close() {}

func (f *router) set(up, refuse bool) {
	f.mu.Lock()
	f.up, f.refuse = up, refuse
	f.mu.Unlock()
}

// retries collects the retry attribute of each failure line.
type retries struct {
	mu sync.Mutex
	n  []int64
}

func (l *retries) notice(level slog.Level, _ string, attrs ...slog.Attr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range attrs {
		if a.Key == "retry" && level == slog.LevelWarn {
			l.n = append(l.n, a.Value.Int64())
		}
	}
}

// onePerStep fails unless the failure lines are retry=1, 2, ... n, one
// per connect that failed.
func (l *retries) onePerStep(t *testing.T, failed int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.n) != failed {
		t.Errorf("%d failure lines for %d failed connects", len(l.n), failed)
	}
	for i, n := range l.n {
		if n != int64(i+1) {
			t.Fatalf("failure lines %v: want retry=1, 2, ... once each", l.n)
		}
	}
}

// TestRouterBackInStepWithinSeconds: a router down for ten minutes, at
// the 60 s backoff step, is pushed to within 5 s of answering again
// (at most aliveEvery), whenever in the step it comes back; the failure
// is still logged once per backoff step.
func TestRouterBackInStepWithinSeconds(t *testing.T) {
	for _, back := range []time.Duration{600 * time.Second, 600*time.Second + 100*time.Millisecond,
		601*time.Second + time.Millisecond, 601900 * time.Millisecond, 630 * time.Second, 662 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			f, log := &router{}, &retries{}
			r := newReconciler("x", f, Intervals{}, log.notice, half)
			t0 := time.Now()
			r.Set(key("a"), Down, 0)
			stop := start(t, r)
			defer stop()
			time.Sleep(back)
			f.set(true, false)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if r.Stats().Pending != 0 {
				t.Errorf("back at %v: not in step 5 s later", back)
			}
			f.mu.Lock()
			caught, failed := f.pushed.Sub(t0)-back, len(f.connects)-1
			never := f.pushed.IsZero()
			f.mu.Unlock()
			if never {
				t.Fatalf("back at %v: never pushed", back)
			}
			t.Logf("back at %v: in step %v later, after %d failed connects", back, caught, failed)
			if caught > 5*time.Second {
				t.Errorf("back at %v: in step %v later, want within 5 s", back, caught)
			}
			if failed > 20 {
				t.Errorf("%d connects in %v", failed, back)
			}
			log.onePerStep(t, failed)
		})
	}
}

// TestRouterThatAnswersIsRetriedAtBackoff: a router that answers the
// probe but refuses the login is not retried sooner than the backoff, and
// is probed once per step.
func TestRouterThatAnswersIsRetriedAtBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, log := &router{up: true, refuse: true}, &retries{}
		r := newReconciler("x", f, Intervals{}, log.notice, half)
		t0 := time.Now()
		stop := start(t, r)
		time.Sleep(10 * time.Minute)
		stop()
		f.mu.Lock()
		defer f.mu.Unlock()
		// rand 0.5: no jitter, so the waits are 1, 2, 4 ... 32, then 60 s.
		want, at := []time.Duration{0}, time.Duration(0)
		for step := 0; ; step++ {
			if at += r.backoff(step); at > 10*time.Minute {
				break
			}
			want = append(want, at)
		}
		if len(f.connects) != len(want) {
			t.Fatalf("%d connects in 10 minutes, want %d", len(f.connects), len(want))
		}
		for i, c := range f.connects {
			if c.Sub(t0) != want[i] {
				t.Errorf("connect %d at %v, want %v", i, c.Sub(t0), want[i])
			}
		}
		if f.probes != len(f.connects) {
			t.Errorf("%d probes for %d failed connects, want one per backoff step", f.probes, len(f.connects))
		}
		log.onePerStep(t, len(f.connects))
	})
}

// aliveBound bounds each of TestAliveProbes' loopback probes: it only
// stops a hung one and decides nothing, so a slow answer on a loaded
// host is still an answer.
const aliveBound = 30 * time.Second

// TestAliveProbes: each driver's probe answers nil for its router and an
// error for a closed port or another server.
func TestAliveProbes(t *testing.T) {
	banner := func(text string) string {
		return serveTCP(t, func(c net.Conn) { io.WriteString(c, text); c.Close() })
	}
	rpc := func(body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, c := range []struct {
		name string
		drv  aliver
		ok   bool
	}{
		{"ami", &AMI{Address: banner("Asterisk Call Manager/9.0.0\r\n"), Timeout: aliveBound}, true},
		{"ami, another server", &AMI{Address: banner("SSH-2.0-OpenSSH\r\n"), Timeout: aliveBound}, false},
		{"ami, closed", &AMI{Address: closed.Listener.Addr().String(), Timeout: aliveBound}, false},
		{"kamailio", &Kamailio{URL: rpc(`{"jsonrpc":"2.0","result":"kamailio 5.6.4","id":1}`), Timeout: aliveBound}, true},
		{"kamailio, error object", &Kamailio{URL: rpc(`{"jsonrpc":"2.0","error":{"code":500,"message":"x"},"id":1}`), Timeout: aliveBound}, true},
		{"kamailio, not JSON-RPC", &Kamailio{URL: rpc(`<html>`), Timeout: aliveBound}, false},
		{"kamailio, closed", &Kamailio{URL: closed.URL, Timeout: aliveBound}, false},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), aliveBound)
		err := c.drv.alive(ctx)
		cancel()
		if (err == nil) != c.ok {
			t.Errorf("%s: alive %v, want ok %v", c.name, err, c.ok)
		}
	}
}
