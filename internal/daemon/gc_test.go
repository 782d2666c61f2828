package daemon

import (
	"runtime/debug"
	"testing"
)

// TestGCPercent: the daemon collects at 50% unless GOGC says otherwise.
func TestGCPercent(t *testing.T) {
	saved := debug.SetGCPercent(100)
	defer debug.SetGCPercent(saved)
	TuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("without GOGC: %d, want %d", got, DefaultGCPercent)
	}
	TuneGC(func(k string) string { return map[string]string{"GOGC": "200"}[k] })
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: %d, want the runtime's own (100 here)", got)
	}
}
