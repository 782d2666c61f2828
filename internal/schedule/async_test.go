package schedule

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestAsyncJobsEndWithFinish starts jobs from the loop without a goroutine
// each, as the engine does; a job ends when its owner calls Finish, one second later here, and
// the item is due again at the time Finish gives.
func TestAsyncJobsEndWithFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var s *Scheduler
		rec := &recorder{t0: t0}
		s = New(Config{}, func(_ context.Context, id ID, due time.Time) {
			rec.add(id, due)
			time.AfterFunc(time.Second, func() { s.Finish(id, due.Add(10*time.Second)) })
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		s.Set(1, t0.Add(time.Second))
		s.Set(2, t0.Add(2*time.Second))
		time.Sleep(1500 * time.Millisecond)
		if st := s.Stats(); st.InFlight != 1 || st.Waiting != 1 {
			t.Fatalf("stats at 1.5 s %+v, want 1 in flight and 1 waiting", st)
		}
		time.Sleep(19 * time.Second) // until 20.5 s
		cancel()
		<-done
		want := []call{{1, time.Second, time.Second}, {2, 2 * time.Second, 2 * time.Second},
			{1, 11 * time.Second, 11 * time.Second}, {2, 12 * time.Second, 12 * time.Second}}
		if got := rec.get(); !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
	})
}

// TestAsyncRunWaitsForFinish: after cancellation Run returns only when
// every started job is finished, and an item removed while its job ran is
// released at Finish.
func TestAsyncRunWaitsForFinish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var released []ID
		started := make(chan ID, 1)
		s := New(Config{Released: func(id ID) { mu.Lock(); released = append(released, id); mu.Unlock() }},
			func(_ context.Context, id ID, _ time.Time) { started <- id })
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		s.Set(3, time.Now())
		id := <-started
		if !s.Remove(id) {
			t.Fatal("Remove does not report the started job")
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Run returned with a job in flight")
		default:
		}
		s.Finish(id, time.Now().Add(time.Minute))
		<-done
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(released, []ID{3}) {
			t.Fatalf("released %v, want [3]", released)
		}
		if _, ok := s.Due(3); ok {
			t.Fatal("a removed item is due again")
		}
	})
}
