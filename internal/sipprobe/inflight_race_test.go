//go:build race

package sipprobe

// inFlightTestN stays under the race detector's limit of 8128 live
// goroutines.
const inFlightTestN = 7_000
