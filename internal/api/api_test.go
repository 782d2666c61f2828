package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestTimeJSON(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	for _, c := range []struct {
		in   Time
		want string
	}{
		{Time{}, `null`},
		{At(time.Date(2026, 12, 1, 12, 0, 4, 123456789, time.UTC)), `"2026-12-01T12:00:04.123Z"`},
		{At(time.Date(2026, 12, 1, 13, 0, 4, 0, paris)), `"2026-12-01T12:00:04.000Z"`},
	} {
		b, err := json.Marshal(c.in)
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.in, b, err, c.want)
		}
		var back Time
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if want := c.in.Truncate(time.Millisecond); !back.Equal(want) || back.IsZero() != c.in.IsZero() {
			t.Errorf("Unmarshal(%s) = %v, want %v", b, back, want)
		}
	}
	var bad Time
	if err := json.Unmarshal([]byte(`"yesterday"`), &bad); err == nil {
		t.Error(`Unmarshal("yesterday") succeeded`)
	}
}

// TestContactRoundTrip holds that what the server writes the client reads
// back whole, the inline statistics and a null last result included.
func TestContactRoundTrip(t *testing.T) {
	at := At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	for _, c := range []Contact{
		{AoR: "trunk", URI: "sip:a@192.0.2.1", Status: "Reachable", Routable: true, Phase: "Healthy",
			RTTUsec: 1234, FailureThreshold: 3, SuccessThreshold: 1, NextProbeAt: at,
			LastResult: &LastResult{At: at, OK: true, Code: 200},
			Stats:      Stats{SRTTUsec: 1200, RTTMaxUsec: 2000, LossRatio: 0.25, LossWindow: 4, Probes: 4, FailuresTotal: 1}},
		{AoR: "trunk", URI: "sip:b@192.0.2.2", Status: "NonQualified", Phase: "Healthy"},
	} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back Contact
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if !reflect.DeepEqual(back.Stats, c.Stats) || (back.LastResult == nil) != (c.LastResult == nil) ||
			!back.NextProbeAt.Equal(c.NextProbeAt.Time) || back.URI != c.URI || back.RTTUsec != c.RTTUsec {
			t.Errorf("round trip of %s gave %+v", b, back)
		}
	}
}
