package web

import (
	"encoding/json"
	"strconv"

	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// contactEventJSON is the data of status, failure and recovery events.
type contactEventJSON struct {
	Seq              uint64 `json:"seq"`
	Kind             string `json:"kind"`
	Time             stamp  `json:"time"`
	AoR              string `json:"aor"`
	URI              string `json:"uri"`
	From             string `json:"from"`
	To               string `json:"to"`
	Routable         bool   `json:"routable"`
	LatencyOnly      bool   `json:"latency_only"`
	Failures         int    `json:"failures"`
	FailureThreshold int    `json:"failure_threshold"`
	Successes        int    `json:"successes"`
	SuccessThreshold int    `json:"success_threshold"`
	Reason           string `json:"reason"`
	Code             int    `json:"code"`
	RTTUsec          int64  `json:"rtt_usec"`
	NextProbeAt      stamp  `json:"next_probe_at"`
	Line             string `json:"line,omitempty"`
}

// availabilityEventJSON is the data of availability events.
type availabilityEventJSON struct {
	Seq       uint64 `json:"seq"`
	Kind      string `json:"kind"`
	Time      stamp  `json:"time"`
	AoR       string `json:"aor"`
	Available bool   `json:"available"`
}

// gapJSON is the data of a gap event: events after LastEventID were lost
// to the client; the stream resumes at NextEventID (0: none kept yet).
type gapJSON struct {
	LastEventID uint64 `json:"last_event_id"`
	NextEventID uint64 `json:"next_event_id,omitempty"`
}

// eventData returns the JSON data of ev.
func eventData(ev *engine.Event) any {
	if ev.Kind == engine.AvailabilityChanged {
		return availabilityEventJSON{Seq: ev.Seq, Kind: ev.Kind.String(), Time: stamp(ev.Time),
			AoR: ev.AoR, Available: ev.Available}
	}
	line, _ := asterisk.Line(*ev)
	return contactEventJSON{
		Seq: ev.Seq, Kind: ev.Kind.String(), Time: stamp(ev.Time), AoR: ev.AoR, URI: ev.URI,
		From: ev.From.String(), To: ev.To.String(), Routable: ev.Routable, LatencyOnly: ev.LatencyOnly,
		Failures: ev.Failures, FailureThreshold: ev.FailureThreshold,
		Successes: ev.Successes, SuccessThreshold: ev.SuccessThreshold,
		Reason: reasonText(ev.Reason, ev.Result.Code), Code: ev.Result.Code,
		RTTUsec: ev.Result.RTT.Microseconds(), NextProbeAt: stamp(ev.Next), Line: line,
	}
}

// encodeEvent builds ev's SSE frame: id, event name and one data line
// (encoding/json never emits a raw newline).
func encodeEvent(ev engine.Event) frame {
	data, _ := json.Marshal(eventData(&ev)) // plain structs: cannot fail
	b := make([]byte, 0, len(data)+48)
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ev.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ev.Kind.String()...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return frame{seq: ev.Seq, data: b}
}

// gapFrame builds a gap event, which has no id.
func gapFrame(last, next uint64) []byte {
	data, _ := json.Marshal(gapJSON{LastEventID: last, NextEventID: next})
	return append(append([]byte("event: gap\ndata: "), data...), "\n\n"...)
}
