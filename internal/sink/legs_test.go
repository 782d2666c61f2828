package sink

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/observe"
	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// legsConf is a configuration of three endpoints: trunk (AoR trunk,
// qualified), multi (AoRs a and b, qualified, and off, not) and phone
// (AoR phone, qualify off).
func legsConf() *pjsip.Config {
	on := &qualify.Policy{Frequency: 30 * time.Second}
	aor := func(name string, p *qualify.Policy) pjsip.AoR {
		return pjsip.AoR{AoR: probe.AoR{Name: name, Contacts: []string{"sip:" + name + "@192.0.2.1"}, Policy: p}}
	}
	return &pjsip.Config{
		AoRs: []pjsip.AoR{aor("a", on), aor("b", on), aor("off", nil), aor("phone", nil), aor("trunk", on)},
		Endpoints: []pjsip.Endpoint{{Name: "multi", AoRs: []string{"a", "off", "b"}},
			{Name: "phone", AoRs: []string{"phone"}}, {Name: "trunk", AoRs: []string{"trunk"}}},
	}
}

// ev is one Manager event of channel ch (Uniqueid id) with fields kv.
func ev(name, ch, id string, kv ...string) map[string]string {
	m := map[string]string{"Event": name, "Channel": ch, "Uniqueid": id}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// TestLegs feeds the event sequences the real Asterisk sent (see
// TestAMICallsReal) and their variants, and checks the observations.
func TestLegs(t *testing.T) {
	const ch, id = "PJSIP/trunk-0000002a", "1796625832.2"
	newOut := ev("Newchannel", ch, id, "ChannelState", "0")
	hang := func(kv ...string) map[string]string { return ev("Hangup", ch, id, kv...) }
	state := func(s string) map[string]string { return ev("Newstate", ch, id, "ChannelState", s) }
	obs := func(aor string, o observe.Outcome, code int) observe.Observation {
		return observe.Observation{AoR: aor, Outcome: o, Code: code, Source: observe.SourceAMI}
	}
	for _, tc := range []struct {
		name    string
		events  []map[string]string
		want    []observe.Observation
		dropped uint64
	}{
		{"answered", []map[string]string{newOut, state("5"), state("6"), hang("Cause", "16")},
			[]observe.Observation{obs("trunk", observe.Answered, 0)}, 0},
		{"timer B", []map[string]string{newOut, hang("Cause", "18", "TechCause", "408")},
			[]observe.Observation{obs("trunk", observe.Timeout, 0)}, 0},
		{"408 after 180 is the peer's", []map[string]string{newOut, state("5"), hang("Cause", "18", "TechCause", "408")},
			[]observe.Observation{obs("trunk", observe.Failed, 408)}, 0},
		{"503", []map[string]string{newOut, hang("Cause", "34", "TechCause", "503")},
			[]observe.Observation{obs("trunk", observe.Failed, 503)}, 0},
		{"486", []map[string]string{newOut, state("5"), hang("Cause", "17", "TechCause", "486")},
			[]observe.Observation{obs("trunk", observe.Failed, 486)}, 0},
		{"cancelled while ringing", []map[string]string{newOut, state("5"), hang("Cause", "0")}, nil, 0},
		{"cancelled before any answer", []map[string]string{newOut, hang("Cause", "19")}, nil, 0},
		{"487 to the router's CANCEL", []map[string]string{newOut, state("5"), hang("Cause", "127", "TechCause", "487")}, nil, 0},
		{"incoming channel", []map[string]string{ev("Newchannel", ch, id, "ChannelState", "4"),
			ev("Hangup", ch, id, "TechCause", "503")}, nil, 0},
		{"endpoint not qualified", []map[string]string{ev("Newchannel", "PJSIP/phone-00000001", id, "ChannelState", "0"),
			ev("Hangup", "PJSIP/phone-00000001", id, "TechCause", "503")}, nil, 0},
		{"unknown endpoint", []map[string]string{ev("Newchannel", "PJSIP/nobody-00000001", id, "ChannelState", "0"),
			ev("Hangup", "PJSIP/nobody-00000001", id, "TechCause", "503")}, nil, 0},
		{"not chan_pjsip", []map[string]string{ev("Newchannel", "Local/100@out-00000000;1", id, "ChannelState", "0"),
			ev("Hangup", "Local/100@out-00000000;1", id, "TechCause", "503")}, nil, 0},
		{"every qualified AoR of the endpoint", []map[string]string{ev("Newchannel", "PJSIP/multi-00000001", id, "ChannelState", "0"),
			ev("Hangup", "PJSIP/multi-00000001", id, "TechCause", "503")},
			[]observe.Observation{obs("a", observe.Failed, 503), obs("b", observe.Failed, 503)}, 0},
		{"bad TechCause", []map[string]string{newOut, hang("TechCause", "5o3")}, nil, 1},
		{"TechCause out of range", []map[string]string{newOut, hang("TechCause", "999")}, nil, 1},
		{"no Uniqueid", []map[string]string{ev("Newchannel", ch, "", "ChannelState", "0")}, nil, 1},
		{"hangup of a leg never seen", []map[string]string{hang("TechCause", "503")}, nil, 0},
		{"answered once", []map[string]string{newOut, state("6"), state("6"), hang("TechCause", "503")},
			[]observe.Observation{obs("trunk", observe.Answered, 0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLegs(legsConf())
			now := time.Unix(1796625832, 0)
			var got []observe.Observation
			for _, e := range tc.events {
				got = l.Event(got, now, e)
			}
			for i := range got {
				if !got[i].Time.Equal(now) {
					t.Errorf("observation %d at %v, want %v", i, got[i].Time, now)
				}
				if err := got[i].Validate(); err != nil {
					t.Errorf("observation %d: %v", i, err)
				}
				got[i].Time = time.Time{}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("observations %+v, want %+v", got, tc.want)
			}
			if l.Stats.Dropped != tc.dropped {
				t.Errorf("dropped %d, want %d", l.Stats.Dropped, tc.dropped)
			}
			if l.Len() > 1 {
				t.Errorf("%d legs followed", l.Len())
			}
		})
	}
}

// TestLegsBounded holds that legs that never hang up stop being followed
// at maxLegs, the others dropped and counted, and that Reset forgets
// them.
func TestLegsBounded(t *testing.T) {
	l := NewLegs(legsConf())
	for i := range maxLegs + 10 {
		l.Event(nil, time.Time{}, ev("Newchannel", "PJSIP/trunk-00000001", "id"+strconv.Itoa(i), "ChannelState", "0"))
	}
	if l.Len() != maxLegs || l.Stats.Dropped != 10 {
		t.Fatalf("%d legs followed, %d dropped; want %d and 10", l.Len(), l.Stats.Dropped, maxLegs)
	}
	l.Reset()
	if l.Len() != 0 {
		t.Fatalf("%d legs after Reset", l.Len())
	}
}

// FuzzAMICalls feeds arbitrary bytes to the Manager reader as a call
// event stream and each message it reads to a Legs: every observation
// valid, the legs bounded, never a panic or a hang.
func FuzzAMICalls(f *testing.F) {
	f.Add("Event: Newchannel\r\nChannel: PJSIP/trunk-00000000\r\nChannelState: 0\r\nUniqueid: 1.1\r\n\r\n" +
		"Event: Hangup\r\nChannel: PJSIP/trunk-00000000\r\nUniqueid: 1.1\r\nCause: 18\r\nTechCause: 408\r\n\r\n")
	f.Add("Event: Newchannel\r\nChannel: PJSIP/multi-0000000a\r\nChannelState: 0\r\nUniqueid: 1.2\r\n\r\n" +
		"Event: Newstate\r\nChannel: PJSIP/multi-0000000a\r\nChannelState: 6\r\nUniqueid: 1.2\r\n\r\n" +
		"Event: Hangup\r\nUniqueid: 1.2\r\nTechCause: 503\r\n\r\n")
	f.Add("Event: Hangup\r\nUniqueid: \r\nTechCause: -1\r\n\r\nEvent:\r\n\r\n")
	f.Add(strings.Repeat("Event: Newchannel\r\n", 3000))
	f.Fuzz(func(t *testing.T, in string) {
		a := &AMI{rd: bufio.NewReaderSize(strings.NewReader(in), maxLine)}
		l := NewLegs(legsConf())
		var out []observe.Observation
		for n := 0; ; n++ {
			m, err := a.message()
			if err != nil {
				if err != io.EOF && !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), "message") {
					t.Fatalf("reader error %v", err)
				}
				break
			}
			out = l.Event(out[:0], time.Unix(1, 0), m)
			for _, o := range out {
				if err := o.Validate(); err != nil {
					t.Fatalf("observation %+v: %v", o, err)
				}
				if o.AoR != "trunk" && o.AoR != "a" && o.AoR != "b" {
					t.Fatalf("observation of AoR %q", o.AoR)
				}
			}
			if l.Len() > maxLegs || n > len(in) {
				t.Fatalf("%d legs after %d messages", l.Len(), n)
			}
		}
	})
}
