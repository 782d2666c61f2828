package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestBuildReport(t *testing.T) {
	phases := testPhases()
	phases[1].Counters = nftCounters{ReqIn: 80, ReqDropped: 16, RespOut: 64, RespDropped: 12}
	trs := []transition{
		{Prober: proberN1, At: at(20)}, {Prober: proberN1, At: at(22), Up: true},
		{Prober: proberN1, At: at(52)}, {Prober: proberN1, At: at(61), Up: true},
	}
	preds := map[int]map[string]prediction{
		0:  {proberN1: {DetectionMeanS: 1.5, DetectionWorstS: 2.5}},
		20: {proberN1: {FalseOutagesPerDay: 8640, UnavailableFraction: 0.25}},
	}
	s := fullSettings()
	rep := buildReport(s, phases, trs, preds, nil)
	if len(rep.Loss) != 2*len(probers) || len(rep.Dead) != len(probers) || len(rep.Phases) != len(phases) {
		t.Fatalf("rows: %d loss, %d dead, %d phases", len(rep.Loss), len(rep.Dead), len(rep.Phases))
	}
	want := lossRow{Prober: proberN1, LossPercent: 20, DurationS: 30, MeasuredLossPercent: 100 * 28.0 / 144,
		FalseOutages: 1, PredictedFalseOutages: 3, UnroutableS: 2, PredictedUnroutableS: 7.5}
	if got := rep.Loss[len(probers)]; got != want {
		t.Errorf("loss row\n got %+v\nwant %+v", got, want)
	}
	wantDead := deadRow{Prober: proberN1, Detected: true, DetectionS: 2, PredictedDetectionMeanS: 1.5,
		PredictedDetectionWorstS: 2.5, Recovered: true, RecoveryS: 1, RecoveryWorstS: 2}
	if got := rep.Dead[0]; got != wantDead {
		t.Errorf("dead row\n got %+v\nwant %+v", got, wantDead)
	}
	if got := rep.Dead[1].RecoveryWorstS; got != (s.Timeout + s.Retry).Seconds() {
		t.Errorf("N=3 recovery worst %v, want T + R", got)
	}
	checkPrinted(t, rep)
}

// checkPrinted: the text names every prober and phase; the JSON reads back.
func checkPrinted(t *testing.T, rep report) {
	t.Helper()
	var text, js bytes.Buffer
	if err := rep.print(&text, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"qualifyd N=1 (Asterisk)", "qualifyd N=3 R=0.5s", "Kamailio threshold 3", "loss 20%", "1 (3.00)", "2.00"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.print(&js, true); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Loss) != len(rep.Loss) {
		t.Errorf("JSON: %v, %d rows", err, len(back.Loss))
	}
}

func TestWorse(t *testing.T) {
	clean, five, twenty, dead := impairment{}, impairment{lossPercent: 5}, impairment{lossPercent: 20}, impairment{dead: true}
	tests := []struct {
		a, b impairment
		want bool
	}{
		{clean, five, true}, {five, twenty, true}, {twenty, dead, true}, {clean, dead, true},
		{twenty, five, false}, {twenty, clean, false}, {dead, clean, false}, {clean, clean, false}, {dead, dead, false},
	}
	for _, tc := range tests {
		if got := worse(tc.a, tc.b); got != tc.want {
			t.Errorf("worse(%+v, %+v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
