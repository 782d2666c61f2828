package schedule

import (
	"context"
	"slices"
	"testing"
	"time"
)

// manual is a scheduler driven by hand in virtual time: StartDue at the
// clock, Finish by the test.
type manual struct {
	*Scheduler
	now     time.Time
	started []Job
}

// Job is one job started by a manual scheduler.
type Job struct {
	ID  ID
	Due time.Time
}

func newManual(cfg Config) *manual {
	m := &manual{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = func() time.Time { return m.now }
	m.Scheduler = New(cfg, func(_ context.Context, id ID, due time.Time) {
		m.started = append(m.started, Job{id, due})
	})
	return m
}

// startAt moves the clock to at, starts the due items and returns them.
func (m *manual) startAt(at time.Time) []Job {
	m.now = at
	m.started = m.started[:0]
	m.StartDue(context.Background())
	return slices.Clone(m.started)
}

func ids(jobs []Job) []ID {
	out := make([]ID, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestStartDueInDueOrder(t *testing.T) {
	m := newManual(Config{})
	t0 := m.now
	m.Set(1, t0.Add(3*time.Second))
	m.Set(2, t0.Add(time.Second))
	m.Set(3, t0.Add(2*time.Second))
	m.Set(4, t0.Add(time.Hour))
	if next, ok := m.Next(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %v %v, want t0+1s", next, ok)
	}
	if got := m.startAt(t0.Add(500 * time.Millisecond)); len(got) != 0 {
		t.Fatalf("started %v before anything was due", got)
	}
	got := m.startAt(t0.Add(3 * time.Second))
	if !slices.Equal(ids(got), []ID{2, 3, 1}) || !got[0].Due.Equal(t0.Add(time.Second)) {
		t.Fatalf("started %+v, want 2, 3, 1 with their due times", got)
	}
	if st := m.Stats(); st.InFlight != 3 || st.Waiting != 1 {
		t.Fatalf("stats %+v, want 3 in flight, 1 waiting", st)
	}
}

func TestStartDueHonoursMaxInFlight(t *testing.T) {
	m := newManual(Config{MaxInFlight: 2})
	for id := range ID(5) {
		m.Set(id, m.now)
	}
	if got := m.startAt(m.now); len(got) != 2 {
		t.Fatalf("MaxInFlight 2 started %d", len(got))
	}
	if got := m.startAt(m.now); len(got) != 0 {
		t.Fatalf("MaxInFlight 2 with two running started %d more", len(got))
	}
	m.Finish(0, time.Time{})
	if got := m.startAt(m.now); len(got) != 1 {
		t.Fatalf("after Finish started %d, want 1", len(got))
	}
}

func TestFinishRequeues(t *testing.T) {
	m := newManual(Config{})
	m.Set(7, m.now)
	m.startAt(m.now)
	if _, ok := m.Next(); ok {
		t.Fatal("a running item is still waiting")
	}
	m.Finish(7, m.now.Add(30*time.Second))
	if d, ok := m.Due(7); !ok || !d.Equal(m.now.Add(30*time.Second)) {
		t.Fatalf("Due after Finish = %v %v, want t0+30s", d, ok)
	}
	m.startAt(m.now.Add(30 * time.Second))
	m.Finish(7, time.Time{})
	if _, ok := m.Due(7); ok {
		t.Fatal("Finish with a zero time must leave the item idle")
	}
}

func TestSetAndRemoveWhileStarted(t *testing.T) {
	var released []ID
	m := newManual(Config{Released: func(id ID) { released = append(released, id) }})
	m.Set(1, m.now)
	m.Set(2, m.now)
	m.startAt(m.now)
	m.Set(1, m.now.Add(5*time.Second)) // overrides the time Finish passes
	if !m.Remove(2) {
		t.Fatal("Remove must report the started job")
	}
	m.Finish(1, m.now.Add(time.Minute))
	m.Finish(2, m.now.Add(time.Minute))
	if d, ok := m.Due(1); !ok || !d.Equal(m.now.Add(5*time.Second)) {
		t.Fatalf("Due(1) = %v %v, want the time Set while it ran", d, ok)
	}
	if _, ok := m.Due(2); ok || !slices.Equal(released, []ID{2}) {
		t.Fatalf("removed item: due %v, released %v", ok, released)
	}
}

func TestFinishInsideStart(t *testing.T) {
	// A job finished inside its StartFunc, as a probe that fails at once
	// is, without Run: the item is requeued at the time Finish gives, and
	// not started again before it.
	m := newManual(Config{})
	n := 0
	m.Scheduler = New(Config{Now: func() time.Time { return m.now }}, func(_ context.Context, id ID, due time.Time) {
		n++
		m.Finish(id, due.Add(time.Second))
	})
	m.Set(1, m.now)
	m.StartDue(context.Background())
	if n != 1 {
		t.Fatalf("started %d times in one StartDue, want 1", n)
	}
	if d, ok := m.Due(1); !ok || !d.Equal(m.now.Add(time.Second)) {
		t.Fatalf("Due(1) = %v %v, want t0+1s", d, ok)
	}
}

func TestVirtualEpoch(t *testing.T) {
	// Due times far from the wall clock survive the round trip through the
	// heap's epoch offsets.
	m := newManual(Config{})
	at := m.now.Add(2000 * 24 * time.Hour)
	m.Set(1, at)
	if got := m.startAt(at); len(got) != 1 || !got[0].Due.Equal(at) {
		t.Fatalf("started %+v, want item 1 due at %v", got, at)
	}
}

// TestStatsOverdue: Overdue is how long ago the earliest waiting item
// fell due, zero while nothing waiting is late, and back to zero once the
// late items are started.
func TestStatsOverdue(t *testing.T) {
	m := newManual(Config{})
	t0 := m.now
	m.Set(1, t0.Add(2*time.Second))
	m.Set(2, t0.Add(5*time.Second))
	if st := m.Stats(); st.Overdue != 0 {
		t.Fatalf("nothing due yet: overdue %v", st.Overdue)
	}
	m.now = t0.Add(12 * time.Second) // a loop that did not run for 12 s
	if st := m.Stats(); st.Overdue != 10*time.Second {
		t.Fatalf("overdue %v, want 10s (the earliest item's lateness)", st.Overdue)
	}
	if got := m.startAt(m.now); len(got) != 2 {
		t.Fatalf("started %v", got)
	}
	if st := m.Stats(); st.Overdue != 0 || st.InFlight != 2 {
		t.Fatalf("after the start: %+v", st)
	}
}
