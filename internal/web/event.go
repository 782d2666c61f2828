package web

import (
	"encoding/json"
	"strconv"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/asterisk"
	"github.com/qualifyd/qualifyd/internal/engine"
)

// eventData returns the JSON data of ev.
func eventData(ev *engine.Event) any {
	if ev.Kind == engine.AvailabilityChanged {
		return api.AvailabilityEvent{Seq: ev.Seq, Kind: ev.Kind.String(), Time: api.At(ev.Time),
			AoR: ev.AoR, Available: ev.Available}
	}
	line, _ := asterisk.Line(*ev)
	return api.ContactEvent{
		Seq: ev.Seq, Kind: ev.Kind.String(), Time: api.At(ev.Time), AoR: ev.AoR, URI: ev.URI,
		From: ev.From.String(), To: ev.To.String(), Routable: ev.Routable, LatencyOnly: ev.LatencyOnly,
		Failures: ev.Failures, FailureThreshold: ev.FailureThreshold,
		Successes: ev.Successes, SuccessThreshold: ev.SuccessThreshold,
		Reason: reasonText(ev.Reason, ev.Result.Code), Code: ev.Result.Code,
		RTTUsec: ev.Result.RTT.Microseconds(), NextProbeAt: api.At(ev.Next), Draining: ev.Draining, Line: line,
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
	data, _ := json.Marshal(api.Gap{LastEventID: last, NextEventID: next})
	return append(append([]byte("event: gap\ndata: "), data...), "\n\n"...)
}
