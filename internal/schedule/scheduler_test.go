package schedule

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recorder collects (id, start offset) pairs of jobs.
type recorder struct {
	mu    sync.Mutex
	t0    time.Time
	calls []call
}

type call struct {
	id         ID
	start, due time.Duration
}

func (r *recorder) add(id ID, due time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call{id, time.Since(r.t0), due.Sub(r.t0)})
}

func (r *recorder) get() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

// blockingJob is a job that runs in a goroutine of its own and returns
// when the item is due next (zero: not until Set).
type blockingJob func(ctx context.Context, id ID, due time.Time) (next time.Time)

// start runs a scheduler in the bubble, each job in a goroutine that ends
// it with Finish, as a prober's goroutines end a probe, and returns it
// with a stop function.
func start(t *testing.T, cfg Config, run blockingJob) (*Scheduler, func()) {
	var s *Scheduler
	s = New(cfg, func(ctx context.Context, id ID, due time.Time) {
		go func() { s.Finish(id, run(ctx, id, due)) }()
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s, func() { cancel(); <-done }
}

func TestRunsAtDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{t0: time.Now()}
		s, stop := start(t, Config{}, func(_ context.Context, id ID, due time.Time) time.Time {
			rec.add(id, due)
			return time.Time{}
		})
		defer stop()
		s.Set(1, rec.t0.Add(3*time.Second))
		s.Set(2, rec.t0.Add(1*time.Second))
		s.Set(3, rec.t0.Add(10*time.Second))
		s.Set(3, rec.t0.Add(2*time.Second)) // moved earlier
		s.Set(4, rec.t0.Add(5*time.Second))
		if s.Remove(4) {
			t.Fatal("Remove reports a running job for a waiting item")
		}
		if _, ok := s.Due(4); ok {
			t.Fatal("removed item still due")
		}
		time.Sleep(time.Minute)
		want := []call{{2, time.Second, time.Second}, {3, 2 * time.Second, 2 * time.Second}, {1, 3 * time.Second, 3 * time.Second}}
		if got := rec.get(); !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
	})
}

func TestRescheduleFromJob(t *testing.T) {
	// A job that is due again 2 s after its due time but runs for 3 s is
	// never run twice at once: each run waits for the previous to end.
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{t0: time.Now()}
		running := 0
		var mu sync.Mutex
		s, stop := start(t, Config{}, func(ctx context.Context, id ID, due time.Time) time.Time {
			mu.Lock()
			running++
			if running > 1 {
				t.Errorf("item %d runs twice at once", id)
			}
			mu.Unlock()
			rec.add(id, due)
			time.Sleep(3 * time.Second)
			mu.Lock()
			running--
			mu.Unlock()
			return due.Add(2 * time.Second)
		})
		defer stop()
		s.Set(7, rec.t0)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := rec.get()
		want := []call{{7, 0, 0}, {7, 3 * time.Second, 2 * time.Second}, {7, 6 * time.Second, 4 * time.Second}, {7, 9 * time.Second, 6 * time.Second}}
		if !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
	})
}

func TestMaxInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{t0: time.Now()}
		s, stop := start(t, Config{MaxInFlight: 2}, func(_ context.Context, id ID, due time.Time) time.Time {
			rec.add(id, due)
			time.Sleep(time.Second)
			return time.Time{}
		})
		defer stop()
		for id := range ID(5) {
			s.Set(id, rec.t0)
		}
		time.Sleep(10 * time.Second)
		starts := map[time.Duration]int{}
		for _, c := range rec.get() {
			starts[c.start]++
		}
		if len(rec.get()) != 5 || starts[0] != 2 || starts[time.Second] != 2 || starts[2*time.Second] != 1 {
			t.Fatalf("starts by time %v, want 2 at 0s, 2 at 1s, 1 at 2s", starts)
		}
		if st := s.Stats(); st.InFlight != 0 || st.Waiting != 0 {
			t.Fatalf("stats %+v after all ran", st)
		}
	})
}

func TestStopWaitsForJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		finished := false
		s, stop := start(t, Config{}, func(ctx context.Context, _ ID, _ time.Time) time.Time {
			<-ctx.Done()
			finished = true
			return time.Time{}
		})
		s.Set(1, time.Now())
		synctest.Wait()
		stop()
		if !finished {
			t.Fatal("Run returned before its job did")
		}
	})
}

func TestSetAndRemoveWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{t0: time.Now()}
		var mu sync.Mutex
		var released []ID
		cfg := Config{Released: func(id ID) { mu.Lock(); released = append(released, id); mu.Unlock() }}
		s, stop := start(t, cfg, func(_ context.Context, id ID, due time.Time) time.Time {
			rec.add(id, due)
			time.Sleep(time.Second)
			return due.Add(time.Minute)
		})
		defer stop()
		s.Set(1, rec.t0) // Set while running overrides the returned time
		s.Set(2, rec.t0) // Remove while running drops it
		synctest.Wait()
		s.Set(1, rec.t0.Add(5*time.Second))
		if !s.Remove(2) {
			t.Fatal("Remove must report the running job")
		}
		time.Sleep(90 * time.Second)
		got := rec.get()
		want := []call{{1, 0, 0}, {2, 0, 0}, {1, 5 * time.Second, 5 * time.Second}, {1, 65 * time.Second, 65 * time.Second}}
		if len(got) < 2 || got[0].id == 2 {
			got[0], got[1] = got[1], got[0]
		}
		if !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(released) != 1 || released[0] != 2 {
			t.Fatalf("released %v, want [2]", released)
		}
	})
}

func TestDueReportsWaitingItems(t *testing.T) {
	s := New(Config{}, nil)
	at := time.Now().Add(time.Hour)
	s.Set(3, at)
	if d, ok := s.Due(3); !ok || !d.Equal(at) {
		t.Fatalf("Due(3) = %v %v", d, ok)
	}
	if _, ok := s.Due(4); ok {
		t.Fatal("Due of an absent item")
	}
}
