package schedule

import (
	"slices"
	"testing"
	"time"
)

// virtual is a settable clock for driving a scheduler by hand.
type virtual struct{ t time.Time }

func (v *virtual) now() time.Time { return v.t }

func newManual(cfg Config) (*Scheduler, *virtual) {
	v := &virtual{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Now = v.now
	return New(cfg, nil), v
}

func ids(jobs []Job) []ID {
	out := make([]ID, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

func TestTakeDueInDueOrder(t *testing.T) {
	s, v := newManual(Config{})
	t0 := v.t
	s.Set(1, t0.Add(3*time.Second))
	s.Set(2, t0.Add(time.Second))
	s.Set(3, t0.Add(2*time.Second))
	s.Set(4, t0.Add(time.Hour))
	if next, ok := s.Next(); !ok || !next.Equal(t0.Add(time.Second)) {
		t.Fatalf("Next = %v %v, want t0+1s", next, ok)
	}
	if got := s.TakeDue(t0.Add(500*time.Millisecond), 10, nil); len(got) != 0 {
		t.Fatalf("took %v before anything was due", got)
	}
	got := s.TakeDue(t0.Add(3*time.Second), 10, nil)
	if !slices.Equal(ids(got), []ID{2, 3, 1}) || !got[0].Due.Equal(t0.Add(time.Second)) {
		t.Fatalf("took %+v, want 2, 3, 1 with their due times", got)
	}
	if st := s.Stats(); st.InFlight != 3 || st.Waiting != 1 {
		t.Fatalf("stats %+v, want 3 in flight, 1 waiting", st)
	}
}

func TestTakeDueHonoursLimitAndMaxInFlight(t *testing.T) {
	s, v := newManual(Config{MaxInFlight: 2})
	for id := range ID(5) {
		s.Set(id, v.t)
	}
	if got := s.TakeDue(v.t, 1, nil); len(got) != 1 {
		t.Fatalf("limit 1 took %d", len(got))
	}
	if got := s.TakeDue(v.t, 10, nil); len(got) != 1 {
		t.Fatalf("MaxInFlight 2 with one running took %d more, want 1", len(got))
	}
	s.Done(0, time.Time{})
	if got := s.TakeDue(v.t, 10, nil); len(got) != 1 {
		t.Fatalf("after Done took %d, want 1", len(got))
	}
}

func TestDoneRequeues(t *testing.T) {
	s, v := newManual(Config{})
	s.Set(7, v.t)
	s.TakeDue(v.t, 1, nil)
	if _, ok := s.Next(); ok {
		t.Fatal("a running item is still waiting")
	}
	s.Done(7, v.t.Add(30*time.Second))
	if d, ok := s.Due(7); !ok || !d.Equal(v.t.Add(30*time.Second)) {
		t.Fatalf("Due after Done = %v %v, want t0+30s", d, ok)
	}
	s.TakeDue(v.t.Add(30*time.Second), 1, nil)
	s.Done(7, time.Time{})
	if _, ok := s.Due(7); ok {
		t.Fatal("Done with a zero time must leave the item idle")
	}
}

func TestSetAndRemoveWhileTaken(t *testing.T) {
	var released []ID
	s, v := newManual(Config{Released: func(id ID) { released = append(released, id) }})
	s.Set(1, v.t)
	s.Set(2, v.t)
	s.TakeDue(v.t, 10, nil)
	s.Set(1, v.t.Add(5*time.Second)) // overrides the time Done passes
	if !s.Remove(2) {
		t.Fatal("Remove must report the taken job")
	}
	s.Done(1, v.t.Add(time.Minute))
	s.Done(2, v.t.Add(time.Minute))
	if d, ok := s.Due(1); !ok || !d.Equal(v.t.Add(5*time.Second)) {
		t.Fatalf("Due(1) = %v %v, want the time Set while it ran", d, ok)
	}
	if _, ok := s.Due(2); ok || !slices.Equal(released, []ID{2}) {
		t.Fatalf("removed item: due %v, released %v", ok, released)
	}
}

func TestVirtualEpoch(t *testing.T) {
	// Due times far from the wall clock survive the round trip through the
	// heap's epoch offsets.
	s, v := newManual(Config{})
	at := v.t.Add(2000 * 24 * time.Hour)
	s.Set(1, at)
	if got := s.TakeDue(at, 1, nil); len(got) != 1 || !got[0].Due.Equal(at) {
		t.Fatalf("took %+v, want item 1 due at %v", got, at)
	}
}
