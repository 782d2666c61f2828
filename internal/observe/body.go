package observe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Bounds of POST /api/v1/observations.
const (
	// MaxBody bounds a body, in bytes.
	MaxBody = 64 << 10
	// MaxBatch bounds the observations of one body.
	MaxBatch = 256
)

// Errors ParseBatch returns for a body it drops whole.
var (
	ErrBody      = errors.New("malformed observations body")
	ErrOversized = errors.New("observations body too large")
)

// body is the JSON of POST /api/v1/observations.
type body struct {
	Source       string            `json:"source"`
	Observations []json.RawMessage `json:"observations"`
}

// wire is one observation as the body spells it.
type wire struct {
	Destination string `json:"destination"`
	AoR         string `json:"aor"`
	Contact     string `json:"contact"`
	Outcome     string `json:"outcome"`
	Code        int    `json:"code"`
	RetryAfter  int64  `json:"retry_after"`
	Time        string `json:"time"`
}

// ParseBatch reads the body of POST /api/v1/observations:
//
//	{"source": "kamailio", "observations": [
//	  {"destination": "192.0.2.7:5060", "outcome": "failed", "code": 503, "retry_after": 20,
//	   "time": "2026-12-07T06:00:00.000Z"}]}
//
// It returns the valid observations, and in the Tally the invalid ones
// dropped as malformed. A body it cannot read at all, or over MaxBody or
// MaxBatch, is dropped whole with an error (ErrBody or ErrOversized),
// counted as one observation, or as its batch's length when that is
// known. Unknown fields are errors, so that a misspelt key is not
// silently ignored.
func ParseBatch(data []byte) ([]Observation, Tally, error) {
	var t Tally
	if len(data) > MaxBody {
		t.Dropped[DropOversized] = 1
		return nil, t, fmt.Errorf("%w: over %d bytes", ErrOversized, MaxBody)
	}
	var b body
	src, err := decodeBody(data, &b)
	if err != nil {
		t.Dropped[DropMalformed] = 1
		return nil, t, err
	}
	if len(b.Observations) > MaxBatch {
		t.Dropped[DropOversized] = len(b.Observations)
		return nil, t, fmt.Errorf("%w: %d observations, at most %d", ErrOversized, len(b.Observations), MaxBatch)
	}
	out := make([]Observation, 0, len(b.Observations))
	for _, raw := range b.Observations {
		o, err := parseOne(raw, src)
		if err != nil {
			t.Dropped[DropMalformed]++
			continue
		}
		out = append(out, o)
	}
	return out, t, nil
}

// decodeBody reads data into b and returns its source.
func decodeBody(data []byte, b *body) (Source, error) {
	if err := strict(data, b); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrBody, err)
	}
	if b.Observations == nil {
		return 0, fmt.Errorf("%w: no \"observations\" array", ErrBody)
	}
	if b.Source == "" {
		return SourceAPI, nil
	}
	src, ok := ParseSource(b.Source)
	if !ok {
		return 0, fmt.Errorf("%w: unknown source %q (want api, ami or kamailio)", ErrBody, b.Source)
	}
	return src, nil
}

// strict decodes one JSON value from data into v, refusing unknown
// fields and anything after the value.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// parseOne reads one observation of source src.
func parseOne(raw json.RawMessage, src Source) (Observation, error) {
	var w wire
	if err := strict(raw, &w); err != nil {
		return Observation{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	out, ok := ParseOutcome(w.Outcome)
	if !ok {
		return Observation{}, invalid("unknown outcome %q", w.Outcome)
	}
	if w.RetryAfter < 0 || w.RetryAfter > int64(MaxRetryAfter/time.Second) {
		return Observation{}, invalid("retry_after %d out of 0 to 86400", w.RetryAfter)
	}
	o := Observation{AoR: w.AoR, Contact: w.Contact, Outcome: out, Code: w.Code,
		RetryAfter: time.Duration(w.RetryAfter) * time.Second, Source: src}
	if w.Destination != "" {
		d, ok := Destination(w.Destination)
		if !ok {
			return Observation{}, invalid("bad destination %q", w.Destination)
		}
		o.Destination = d
	}
	if w.Time != "" {
		t, err := time.Parse(time.RFC3339Nano, w.Time)
		if err != nil {
			return Observation{}, invalid("bad time %q", w.Time)
		}
		o.Time = t
	}
	return o, o.Validate()
}
