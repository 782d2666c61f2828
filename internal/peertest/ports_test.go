package peertest

import (
	"strconv"
	"testing"
)

// TestFreePortReservedAcrossBinaries checks that a port FreePort hands
// out is below the ephemeral range, where no outgoing connection takes
// it, and locked against another test binary: a second lock of its file
// (another open file description, as another process would have) fails.
func TestFreePortReservedAcrossBinaries(t *testing.T) {
	low := ephemeralLow()
	for _, network := range []string{"tcp", "udp"} {
		port := FreePort(t, network)
		if port < portFloor || port >= low {
			t.Errorf("%s port %d: want %d-%d, below the ephemeral range", network, port, portFloor, low-1)
		}
		if f := reserve(t, network+"-"+strconv.Itoa(port)); f != nil {
			f.Close()
			t.Errorf("%s port %d: another binary could reserve it too", network, port)
		}
		if !bindable(network, port) {
			t.Errorf("%s port %d: not bindable", network, port)
		}
	}
}
