package schedule

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// TestCoalesce: items due within Coalesce of the previous wake-up start
// together at most Coalesce late; an item due later starts on time.
func TestCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{t0: time.Now()}
		s, stop := start(t, Config{Coalesce: 5 * time.Millisecond}, func(_ context.Context, id ID, due time.Time) time.Time {
			rec.add(id, due)
			return time.Time{}
		})
		defer stop()
		ms := time.Millisecond
		for id, at := range []time.Duration{1000 * ms, 1002 * ms, 1004 * ms, 1010 * ms, 2000 * ms} {
			s.Set(ID(id), rec.t0.Add(at))
		}
		time.Sleep(3 * time.Second)
		want := []call{{0, 1000 * ms, 1000 * ms}, {1, 1005 * ms, 1002 * ms}, {2, 1005 * ms, 1004 * ms},
			{3, 1010 * ms, 1010 * ms}, {4, 2000 * ms, 2000 * ms}}
		got := rec.get()
		slices.SortFunc(got, func(a, b call) int { return int(a.id) - int(b.id) })
		if !slices.Equal(got, want) {
			t.Fatalf("calls %v, want %v", got, want)
		}
	})
}
