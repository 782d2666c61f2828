package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeDriver records what the reconciler does. gate, if set, blocks
// connect until it receives; connectErr and pushErr fail them.
type fakeDriver struct {
	mu         sync.Mutex
	gate       chan struct{}
	connectErr error
	pushErr    func(o Object) error
	connects   []time.Time
	pushes     []Object
	closes     int
}

func (f *fakeDriver) connect(ctx context.Context) error {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects = append(f.connects, time.Now())
	return f.connectErr
}

func (f *fakeDriver) push(_ context.Context, o Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pushErr != nil {
		if err := f.pushErr(o); err != nil {
			return err
		}
	}
	f.pushes = append(f.pushes, o)
	return nil
}

func (f *fakeDriver) close() {
	f.mu.Lock()
	f.closes++
	f.mu.Unlock()
}

// levels returns the pushed keys' names and levels, "name=level".
func (f *fakeDriver) levels() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, o := range f.pushes {
		out = append(out, o.Name+"="+o.Level.String())
	}
	return out
}

// start runs r until the test's bubble ends and returns its stop.
func start(t *testing.T, r *Reconciler) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

func half() float64 { return 0.5 }

func key(name string) Key { return Key{Kind: KindAoR, Name: name} }

func TestBurstCoalescesToLatest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{gate: make(chan struct{})}
		r := newReconciler("x", f, Intervals{}, nil, half)
		stop := start(t, r)
		defer stop()
		for i := range 100_000 {
			r.Set(key("a"), Level(1+i%2), 0) // Up, Down, ..., ends Down
		}
		if s := r.Stats(); s.Pending != 1 || s.Objects != 1 {
			t.Fatalf("stats %+v, want 1 object pending", s)
		}
		close(f.gate)
		synctest.Wait()
		if got := f.levels(); !slices.Equal(got, []string{"a=down"}) {
			t.Fatalf("pushes %v, want one push of the latest level", got)
		}
		if s := r.Stats(); s.Pending != 0 || s.OK != 1 || !s.Up {
			t.Fatalf("stats %+v, want confirmed and up", s)
		}
	})
}

func TestUnknownIsNeverPushed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{}
		r := newReconciler("x", f, Intervals{Reassert: time.Minute}, nil, half)
		stop := start(t, r)
		defer stop()
		r.Set(key("a"), Unknown, 0)
		r.Set(key("b"), Down, 0)
		synctest.Wait()
		r.Set(key("b"), Unknown, 0) // a reload reset it: the router keeps Down
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := f.levels(); !slices.Equal(got, []string{"b=down"}) {
			t.Fatalf("pushes %v", got)
		}
		if s := r.Stats(); s.Pending != 0 || s.Objects != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestBackoffDoublesToCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var notes []string
		f := &fakeDriver{connectErr: errors.New("connection refused")}
		r := newReconciler("x", f, Intervals{}, func(_ slog.Level, msg string, _ ...slog.Attr) {
			notes = append(notes, msg)
		}, half)
		t0 := time.Now()
		stop := start(t, r)
		time.Sleep(200 * time.Second)
		synctest.Wait()
		stop()
		var gaps []time.Duration
		for _, c := range f.connects {
			gaps = append(gaps, c.Sub(t0))
			t0 = c
		}
		want := []time.Duration{0, 1, 2, 4, 8, 16, 32, 60, 60}
		for i := range want {
			want[i] *= time.Second
		}
		if !slices.Equal(gaps, want) {
			t.Fatalf("connect gaps %v, want %v", gaps, want)
		}
		if len(notes) != len(want) || notes[0] != "sink x: connection refused" {
			t.Fatalf("notes %q: want one per attempt, with the router's text", notes)
		}
		if s := r.Stats(); s.Up || s.LastError != "connection refused" {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestJitterStaysWithinTwentyPercent(t *testing.T) {
	for _, x := range []float64{0, 0.999999} {
		r := newReconciler("x", &fakeDriver{}, Intervals{}, nil, func() float64 { return x })
		lo, hi := r.backoff(0), r.backoff(10)
		if lo < 800*time.Millisecond || lo > 1200*time.Millisecond || hi < 48*time.Second || hi > 72*time.Second {
			t.Fatalf("rand %v: backoff %v and %v", x, lo, hi)
		}
	}
}

func TestReassertAndReconnectPushEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		f := &fakeDriver{}
		r := newReconciler("x", f, Intervals{Reassert: 300 * time.Second}, nil, half)
		r.Set(key("a"), Down, 0)
		r.Set(key("b"), Up, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		time.Sleep(300 * time.Second)
		synctest.Wait()
		if got := f.levels(); len(got) != 4 {
			t.Fatalf("pushes %v: want both at connect and both at the reassert", got)
		}
		f.mu.Lock()
		f.pushErr = func(Object) error {
			if fail {
				fail = false
				return errors.New("broken pipe")
			}
			return nil
		}
		f.mu.Unlock()
		r.Set(key("a"), Up, 0)
		synctest.Wait()
		time.Sleep(time.Second) // the first backoff step
		synctest.Wait()
		got := f.levels()[4:]
		slices.Sort(got)
		if !slices.Equal(got, []string{"a=up", "b=up"}) || len(f.connects) != 2 {
			t.Fatalf("after a failed push: pushes %v, %d connects", got, len(f.connects))
		}
	})
}

func TestRetirePushesUpOnceThenForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{}
		r := newReconciler("x", f, Intervals{Reassert: time.Minute}, nil, half)
		stop := start(t, r)
		defer stop()
		r.Set(key("down"), Down, 0)
		r.Set(key("up"), Up, 0)
		synctest.Wait()
		r.Keys(func(k Key) bool { return false })
		synctest.Wait()
		time.Sleep(time.Minute)
		synctest.Wait()
		got := f.levels()
		if !slices.Equal(got[2:], []string{"down=up"}) || !f.pushes[2].Retire {
			t.Fatalf("pushes %v: want one retiring push of the Down object", got)
		}
		if s := r.Stats(); s.Objects != 0 {
			t.Fatalf("stats %+v: want every object forgotten", s)
		}
	})
}

func TestRejectedStaysPendingAndOthersGoOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{pushErr: func(o Object) error {
			if o.Name == "bad" {
				return &Rejected{Err: errors.New("Endpoint 'bad' not found")}
			}
			return nil
		}}
		r := newReconciler("x", f, Intervals{Reassert: time.Minute}, nil, half)
		r.Set(key("bad"), Down, 0)
		r.Set(key("good"), Down, 0)
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		s := r.Stats()
		if got := f.levels(); !slices.Equal(got, []string{"good=down"}) || s.Pending != 1 || s.Error != 1 || s.OK != 1 {
			t.Fatalf("pushes %v, stats %+v", got, s)
		}
		if s.LastError != "Endpoint 'bad' not found" || len(f.connects) != 1 {
			t.Fatalf("stats %+v, %d connects: a rejection keeps the session", s, len(f.connects))
		}
	})
}

func TestReadBackRepairsDifferences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &resyncDriver{router: map[string]Level{"a": Down, "b": Down}}
		r := newReconciler("x", f, Intervals{Resync: 30 * time.Second}, nil, half)
		r.Set(key("a"), Down, 0)
		r.Set(key("b"), Down, 0)
		r.Set(key("c"), Down, 0) // the router has no such object
		stop := start(t, r)
		defer stop()
		synctest.Wait()
		f.mu.Lock()
		f.router["a"] = Up // a router reload reset it
		f.mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.router["a"] != Down || f.pushed != 4 || f.reads != 2 {
			t.Fatalf("router %v after %d pushes and %d reads", f.router, f.pushed, f.reads)
		}
	})
}

// resyncDriver is a router with a readable state.
type resyncDriver struct {
	fakeDriver
	router        map[string]Level
	pushed, reads int
}

func (f *resyncDriver) push(_ context.Context, o Object) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushed++
	if _, ok := f.router[o.Name]; ok {
		f.router[o.Name] = o.Level
	}
	return nil
}

func (f *resyncDriver) resync(context.Context) (func(Key) (Level, bool), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	copy := maps(f.router)
	return func(k Key) (Level, bool) { l, ok := copy[k.Name]; return l, ok }, nil
}

func maps(m map[string]Level) map[string]Level {
	out := make(map[string]Level, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func ExampleLevel() {
	fmt.Println(Unknown, Up, Down)
	// Output: unknown up down
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// TestObjects: each object's wanted and confirmed level, ordered by kind
// and name; pending until the router confirms.
func TestObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{gate: make(chan struct{})}
		r := newReconciler("x", f, Intervals{}, nil, half)
		stop := start(t, r)
		defer stop()
		r.Set(key("b"), Down, 0)
		r.Set(Key{Kind: KindContact, Name: "b", URI: "sip:b@h"}, Up, 0)
		r.Set(key("a"), Unknown, 0)
		want := []ObjectState{{Key: Key{Kind: KindContact, Name: "b", URI: "sip:b@h"}, Want: Up}, {Key: key("a")}, {Key: key("b"), Want: Down}}
		got := r.Objects()
		if !slices.Equal(got, want) {
			t.Fatalf("objects %+v, want %+v", got, want)
		}
		if !got[0].Pending() || got[1].Pending() || !got[2].Pending() {
			t.Fatalf("pending %v %v %v, want true false true", got[0].Pending(), got[1].Pending(), got[2].Pending())
		}
		close(f.gate)
		synctest.Wait()
		for _, o := range r.Objects() {
			if o.Pending() || o.Want != o.Have && o.Want != Unknown {
				t.Errorf("%+v still pending after the pushes", o)
			}
		}
	})
}

// TestConfirmedChangesAreLogged: a router's confirmed level that changes
// is logged, a first up is not, and a webhook's deliveries are not.
func TestConfirmedChangesAreLogged(t *testing.T) {
	for _, routes := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var lines []string
			f := &fakeDriver{}
			r := newReconciler("edge", f, Intervals{}, func(_ slog.Level, msg string, _ ...slog.Attr) {
				mu.Lock()
				lines = append(lines, msg)
				mu.Unlock()
			}, half)
			r.reasserts = routes
			stop := start(t, r)
			defer stop()
			r.Set(key("a"), Up, 0)
			r.Set(key("b"), Down, 0)
			synctest.Wait()
			r.Set(key("a"), Down, 0)
			synctest.Wait()
			r.Set(key("a"), Up, 0)
			synctest.Wait()
			var want []string
			if routes {
				want = []string{"sink edge: aor b is now down in the router", "sink edge: aor a is now down in the router",
					"sink edge: aor a is now up in the router"}
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(lines, want) {
				t.Fatalf("reasserts %v: logged %q, want %q", routes, lines, want)
			}
		})
	}
}

// TestHoldPushesOnlyUps is the panic's rule on one reconciler: what was
// down when the hold began stays down; what goes down while held is
// pushed Up (marked Held, without a reason); a recovery is pushed; after
// the hold, a held object stays held until set Down on fresh evidence,
// and the counts follow.
func TestHoldPushesOnlyUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{}
		r := newReconciler("x", f, Intervals{}, nil, half)
		stop := start(t, r)
		defer stop()
		r.Set(key("a"), Down, qualify.ReasonTimeout)
		r.Set(key("b"), Up, 0)
		r.Set(key("c"), Down, qualify.ReasonTimeout)
		synctest.Wait()
		n := len(f.levels())
		r.Hold(true)
		r.Hold(true) // idempotent
		r.set(key("b"), Down, qualify.ReasonTimeout, true)
		r.set(key("a"), Down, qualify.ReasonTimeout, true) // no change: a stays down
		r.Set(key("c"), Up, 0)                             // a recovery is pushed
		synctest.Wait()
		if s := r.Stats(); s.Held != 1 || s.Pending != 0 {
			t.Fatalf("stats %+v: want b held, none pending", s)
		}
		if got := f.levels()[n:]; !slices.Equal(got, []string{"c=up"}) {
			t.Fatalf("pushes %v: want c's recovery alone (a stays down, b up)", got)
		}
		r.set(key("c"), Down, qualify.ReasonTimeout, true) // down again while held: held
		synctest.Wait()
		objs := r.Objects()
		if objs[0].Want != Down || objs[0].Held || objs[1].Want != Up || !objs[1].Held || !objs[2].Held {
			t.Fatalf("objects %+v: want a down, b and c held", objs)
		}
		r.Hold(false)
		r.set(key("b"), Down, qualify.ReasonTimeout, false) // stale evidence: still held
		synctest.Wait()
		if got := f.levels()[n:]; !slices.Equal(got, []string{"c=up"}) || r.Stats().Held != 2 {
			t.Fatalf("pushes %v, stats %+v: the end of the hold pushes nothing", got, r.Stats())
		}
		r.set(key("b"), Down, qualify.ReasonTimeout, true)
		r.Set(key("c"), Up, 0)
		synctest.Wait()
		if got := f.levels()[n:]; !slices.Equal(got, []string{"c=up", "b=down"}) {
			t.Fatalf("pushes %v: want b down on fresh evidence, c left up", got)
		}
		if p := f.pushes[len(f.pushes)-1]; p.Held || p.Reason != qualify.ReasonTimeout {
			t.Fatalf("push %+v", p)
		}
		if s := r.Stats(); s.Held != 0 || s.Pending != 0 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func sorted(s []string) []string { slices.Sort(s); return s }

// TestReleasePushesWhatTheRouterMayHoldDown: a level driver's objects not
// confirmed up are pushed up and everything is forgotten; with all, every
// object is.
func TestReleasePushesWhatTheRouterMayHoldDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeDriver{}
		r := newReconciler("x", f, Intervals{}, nil, half)
		stop := start(t, r)
		r.Set(key("down"), Down, 0)
		r.Set(key("up"), Up, 0)
		synctest.Wait()
		stop()
		r.Set(key("unknown"), Unknown, 0)
		n, failed := r.Release(t.Context(), false)
		if n != 2 || failed != 0 || r.Stats().Objects != 0 {
			t.Fatalf("released %d, failed %d, stats %+v", n, failed, r.Stats())
		}
		if got := sorted(f.levels()[2:]); !slices.Equal(got, []string{"down=up", "unknown=up"}) {
			t.Fatalf("pushes %v", got)
		}
		r.Set(key("up"), Up, 0)
		r.Set(key("other"), Unknown, 0)
		if n, _ := r.Release(t.Context(), true); n != 2 {
			t.Fatalf("released %d with all, want 2", n)
		}
	})
}

// beatingDriver is a fakeDriver whose pushes take a second each and
// which records its heartbeats' times.
type beatingDriver struct {
	fakeDriver
	beats []time.Time
}

func (b *beatingDriver) push(ctx context.Context, o Object) error {
	time.Sleep(time.Second)
	return b.fakeDriver.push(ctx, o)
}

func (b *beatingDriver) heartbeat(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.beats = append(b.beats, time.Now())
	return nil
}

// counts returns how many heartbeats and pushes reached b.
func (b *beatingDriver) counts() (beats, pushes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.beats), len(b.pushes)
}

// TestBurstKeepsTheHeartbeat: a burst of pushes that takes longer than
// the fail-open window (100 pushes of 1 s, heartbeat every 10 s) still
// sends every heartbeat on time, between two pushes, so that the router
// never fails open in the middle of it.
func TestBurstKeepsTheHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &beatingDriver{}
		r := newReconciler("x", f, Intervals{Heartbeat: 10 * time.Second}, nil, half)
		for i := range 100 {
			r.Set(key(fmt.Sprint(i)), Down, 0)
		}
		begin := time.Now()
		stop := start(t, r)
		defer stop()
		time.Sleep(100*time.Second + time.Millisecond)
		synctest.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.pushes) != 100 {
			t.Fatalf("%d pushes in 100 s, want 100", len(f.pushes))
		}
		last := begin
		for i, at := range f.beats {
			if gap := at.Sub(last); gap > 11*time.Second {
				t.Fatalf("heartbeat %d came %v after the one before (want at most 10 s and a push): %v", i, gap, f.beats)
			}
			last = at
		}
		if len(f.beats) < 10 {
			t.Fatalf("%d heartbeats over a 100 s burst, want at least 10: %v", len(f.beats), f.beats)
		}
	})
}

// TestHeartbeatWithheldWhileUnvouched: while Vouch fails (a stalled
// scheduler) no heartbeat tells the router the verdicts are fresh, the
// session goes on (pushes still go out), and each change is logged once.
func TestHeartbeatWithheldWhileUnvouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &beatingDriver{}
		var notes []string
		var stalled atomic.Bool
		r := newReconciler("x", f, Intervals{Heartbeat: 10 * time.Second}, func(_ slog.Level, msg string, _ ...slog.Attr) {
			if strings.Contains(msg, "heartbeat") {
				notes = append(notes, msg)
			}
		}, half)
		r.vouch = func() error {
			if stalled.Load() {
				return errors.New("the earliest probe is 11s overdue")
			}
			return nil
		}
		stop := start(t, r)
		defer stop()
		time.Sleep(time.Millisecond) // the connect's heartbeat
		synctest.Wait()
		stalled.Store(true)
		time.Sleep(60 * time.Second)
		r.Set(key("a"), Down, 0)
		time.Sleep(2 * time.Second) // a push takes 1 s
		synctest.Wait()
		beats, pushes := f.counts()
		if beats != 1 || pushes != 1 {
			t.Fatalf("stalled for 60 s: %d heartbeats (want the connect's only), %d pushes (want 1)", beats, pushes)
		}
		stalled.Store(false)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		beats, _ = f.counts()
		if beats != 2 {
			t.Fatalf("%d heartbeats after the stall ended, want 2", beats)
		}
		want := []string{"sink x: heartbeat withheld: the earliest probe is 11s overdue: the router fails open after failopen_after", "sink x: heartbeat resumed"}
		if !slices.Equal(notes, want) {
			t.Fatalf("log %q, want %q", notes, want)
		}
	})
}

// TestGateWithholdsPushesAndHeartbeats: while the gate refuses (a cluster
// node that does not lead), nothing reaches the router, neither a push
// nor a heartbeat; once it lets go, the wanted level is pushed.
func TestGateWithholdsPushesAndHeartbeats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &beatingDriver{}
		r := newReconciler("x", f, Intervals{Heartbeat: 10 * time.Second}, nil, half)
		var closed atomic.Bool
		closed.Store(true)
		r.gate = func() error {
			if closed.Load() {
				return errors.New("this node does not lead the cluster")
			}
			return nil
		}
		r.Set(key("a"), Down, 0)
		stop := start(t, r)
		defer stop()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		beats, pushes := f.counts()
		if beats != 0 || pushes != 0 {
			t.Fatalf("gate closed for 5 min: %d heartbeats, %d pushes; want none", beats, pushes)
		}
		closed.Store(false)
		time.Sleep(2 * time.Minute) // the backoff's cap and a push
		synctest.Wait()
		if got := f.levels(); !slices.Equal(got, []string{"a=down"}) {
			t.Fatalf("pushes once open %v, want a=down", got)
		}
	})
}
