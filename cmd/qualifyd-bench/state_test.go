package main

import (
	"testing"
	"time"
)

// TestStateBench: the state bench at a small scale measures what the
// keeper's rule promises: healthy, the results written every 5 minutes
// and a mark at every other tick; flipping, a write at every tick after
// which a verdict moved (the file is small: most ticks, with the bench's
// fixed seed 146 of 180) and a mark at the others, and the old rule a
// write at every tick in both.
func TestStateBench(t *testing.T) {
	healthy, err := simulateState(t.Context(), 1000, 0, 3*time.Minute, 30*time.Minute, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if healthy.StateWrites != 6 || healthy.MarkWrites != 180-6 || healthy.OldWrites != 60 || healthy.Events != 0 {
		t.Errorf("healthy: %+v", healthy)
	}
	flip, err := simulateState(t.Context(), 1000, 0.01, 3*time.Minute, 30*time.Minute, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if flip.StateWrites < 120 || flip.StateWrites+flip.MarkWrites != 180 || flip.Events == 0 || flip.OldWrites != 60 || flip.Ratio < 0.9 {
		t.Errorf("flipping: %+v", flip)
	}
}
