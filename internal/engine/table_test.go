package engine

import (
	"testing"
	"unsafe"
)

// TestSlotSize: a million slots live in one slice, so a field added to
// contact costs a megabyte per million contacts for every 8 bytes.
func TestSlotSize(t *testing.T) {
	if n := unsafe.Sizeof(contact{}); n != 192 {
		t.Fatalf("a slot is %d bytes, want 192", n)
	}
}

func TestSlotTimes(t *testing.T) {
	// The slot's one time means the next probe's due time while idle and
	// the start of the probe in flight while running, never both.
	var c contact
	c.wait(100)
	if c.due() != 100 || c.started() != 0 || c.running {
		t.Fatalf("idle slot: due %d, started %d, running %v", c.due(), c.started(), c.running)
	}
	c.begin(200)
	if c.due() != 0 || c.started() != 200 || !c.running {
		t.Fatalf("running slot: due %d, started %d, running %v", c.due(), c.started(), c.running)
	}
}
