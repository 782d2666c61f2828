package observe

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseBatch(t *testing.T) {
	at := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	body := `{"source":"kamailio","observations":[
		{"destination":"192.0.2.7","outcome":"failed","code":503,"retry_after":20,"time":"2026-12-07T06:00:00Z"},
		{"destination":"sip:Trunk.Example.COM:5080;transport=tcp","outcome":"answered"},
		{"aor":"carrier","contact":"sip:192.0.2.8","outcome":"timeout"},
		{"aor":"carrier","outcome":"bogus"},
		{"destination":"192.0.2.7:5060","aor":"carrier","outcome":"timeout"},
		{"destination":"192.0.2.7:5060","outcome":"timeout","code":408},
		{"destination":"192.0.2.7:5060","outcome":"answered","retry_after":5},
		{"destination":"192.0.2.7:5060","outcome":"failed","code":486,"extra":1}]}`
	got, tally, err := ParseBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := []Observation{
		{Destination: "192.0.2.7:5060", Outcome: Failed, Code: 503, RetryAfter: 20 * time.Second, Source: SourceKamailio, Time: at},
		{Destination: "trunk.example.com:5080", Outcome: Answered, Source: SourceKamailio},
		{AoR: "carrier", Contact: "sip:192.0.2.8", Outcome: Timeout, Source: SourceKamailio},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d observations %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Source != want[i].Source || got[i].Destination != want[i].Destination ||
			got[i].AoR != want[i].AoR || got[i].Contact != want[i].Contact || got[i].Outcome != want[i].Outcome ||
			got[i].Code != want[i].Code || got[i].RetryAfter != want[i].RetryAfter {
			t.Errorf("observation %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if tally.Dropped[DropMalformed] != 5 || tally.Drops() != 5 {
		t.Errorf("tally %+v, want 5 malformed", tally)
	}
}

func TestParseBatchWhole(t *testing.T) {
	many := `{"observations":[` + strings.Repeat(`{"aor":"a","outcome":"answered"},`, MaxBatch) + `{"aor":"a","outcome":"answered"}]}`
	for _, c := range []struct {
		name, body string
		err        error
		drop       Drop
		n          int
	}{
		{"not json", `{`, ErrBody, DropMalformed, 1},
		{"no array", `{"source":"api"}`, ErrBody, DropMalformed, 1},
		{"unknown source", `{"source":"x","observations":[]}`, ErrBody, DropMalformed, 1},
		{"unknown key", `{"observation":[]}`, ErrBody, DropMalformed, 1},
		{"trailing", `{"observations":[]} {}`, ErrBody, DropMalformed, 1},
		{"too many", many, ErrOversized, DropOversized, MaxBatch + 1},
		{"too big", `{"observations":[` + strings.Repeat(" ", MaxBody) + `]}`, ErrOversized, DropOversized, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, tally, err := ParseBatch([]byte(c.body))
			if !errors.Is(err, c.err) || len(got) != 0 {
				t.Fatalf("ParseBatch = %d, %v; want %v", len(got), err, c.err)
			}
			if tally.Dropped[c.drop] != c.n || tally.Drops() != c.n {
				t.Errorf("tally %+v, want %d %v", tally, c.n, c.drop)
			}
		})
	}
}

func TestDestination(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7":              "192.0.2.7:5060",
		"192.0.2.7:5080":         "192.0.2.7:5080",
		"[2001:DB8::1]":          "[2001:db8::1]:5060",
		"Trunk.example.com.":     "trunk.example.com:5060",
		"sips:carrier@192.0.2.9": "192.0.2.9:5061",
		"":                       "",
		"a@b":                    "",
		"[::1":                   "",
		".:0":                    "",
		"host:99999":             "",
		"host:x":                 "",
	} {
		got, ok := Destination(in)
		if got != want || ok != (want != "") {
			t.Errorf("Destination(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestFresh(t *testing.T) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]bool{0: true, -MaxAge: true, -MaxAge - 1: false, MaxSkew: true, MaxSkew + 1: false} {
		o := Observation{Time: now.Add(d)}
		if o.Fresh(now) != want {
			t.Errorf("Fresh at %v = %v, want %v", d, !want, want)
		}
	}
}

func FuzzParseBatch(f *testing.F) {
	f.Add([]byte(`{"observations":[{"destination":"192.0.2.7:5060","outcome":"failed","code":503,"retry_after":20}]}`))
	f.Add([]byte(`{"source":"ami","observations":[{"aor":"a","contact":"sip:x","outcome":"timeout","time":"2026-12-07T06:00:00.5Z"}]}`))
	f.Add([]byte(`{"observations":[{"destination":"[::1]:5","outcome":"answered","code":204}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, tally, err := ParseBatch(data)
		if err != nil && (len(got) != 0 || tally.Drops() == 0) {
			t.Fatalf("error %v with %d observations and %+v", err, len(got), tally)
		}
		if len(got) > MaxBatch {
			t.Fatalf("%d observations", len(got))
		}
		for i := range got {
			if err := got[i].Validate(); err != nil {
				t.Fatalf("returned an invalid observation %+v: %v", got[i], err)
			}
			if got[i].Destination != "" {
				if d, ok := Destination(got[i].Destination); !ok || d != got[i].Destination {
					t.Fatalf("destination %q not as Destination writes it (%q)", got[i].Destination, d)
				}
			}
		}
	})
}

func TestLimiter(t *testing.T) {
	now := time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)
	l := NewLimiter(10, 20)
	for _, c := range []struct {
		after   time.Duration
		n, want int
	}{
		{0, 15, 15}, {0, 15, 5}, {0, 1, 0},
		{500 * time.Millisecond, 10, 5}, // 5 back in half a second
		{-time.Second, 5, 0},            // a clock step back adds nothing
		{10 * time.Second, 100, 20},     // never more than the burst
	} {
		now = now.Add(c.after)
		if got := l.Take(now, c.n); got != c.want {
			t.Fatalf("after %v: Take(%d) = %d, want %d", c.after, c.n, got, c.want)
		}
	}
}
