package main

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

//go:embed lab/prober.cfg lab/options-200.xml
var labFiles embed.FS

// The three probers, in report order. Names are the keys of the report.
const (
	proberN1  = "qualifyd-n1"
	proberN3  = "qualifyd-n3"
	proberKam = "kamailio"
)

// probers lists the probers in report order.
var probers = []string{proberN1, proberN3, proberKam}

// settings are one lossy run's timings and impairments.
type settings struct {
	Frequency    int           // qualify_frequency and ds_ping_interval, seconds (integers for both)
	Timeout      time.Duration // qualify_timeout and tm's fr_timer
	Failures     int           // qualify_failures of the second AoR and ds_probing_threshold
	Retry        time.Duration // qualify_retry_interval of the second AoR
	Losses       []int         // loss levels in percent, one phase each
	LossDuration time.Duration // length of each loss phase
	Dead         time.Duration // length of the dead spell
	Recover      time.Duration // most time allowed to recover after it (and after the loss phases)
	SimDays      float64       // simulated days per prediction
	Qualifyd     string        // the qualifyd binary
	Dir          string        // logs and generated files
}

// fullSettings is `make lossy`: a few minutes.
func fullSettings() settings {
	return settings{Frequency: 2, Timeout: 500 * time.Millisecond, Failures: 3, Retry: 500 * time.Millisecond,
		Losses: []int{5, 20}, LossDuration: 90 * time.Second, Dead: 20 * time.Second, Recover: 15 * time.Second,
		SimDays: 50}
}

// validate checks what the probers and the run need.
func (s settings) validate() error {
	switch {
	case s.Frequency < 1:
		return fmt.Errorf("frequency %ds: want at least 1 s", s.Frequency)
	case s.Timeout <= 0 || s.Timeout >= time.Duration(s.Frequency)*time.Second:
		return fmt.Errorf("timeout %v: want more than 0 and less than the frequency", s.Timeout)
	case s.Failures < 1 || s.Retry <= 0:
		return fmt.Errorf("failures %d, retry %v: want at least 1 and more than 0", s.Failures, s.Retry)
	case s.LossDuration <= 0 || s.Dead <= 0 || s.Recover <= 0 || s.SimDays <= 0:
		return fmt.Errorf("loss phase %v, dead %v, recover %v, simulated days %v: want all positive", s.LossDuration, s.Dead, s.Recover, s.SimDays)
	}
	for _, l := range s.Losses {
		if l < 0 || l > 99 {
			return fmt.Errorf("loss %d%%: want 0 to 99", l)
		}
	}
	return nil
}

// secs formats a duration as fractional seconds for a config file.
func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// aorSection is one type=aor section probing the responder.
func aorSection(name string, freq int, timeout time.Duration, extra string) string {
	return fmt.Sprintf("[%s]\ntype=aor\ncontact=sip:%s@%s:%d\nqualify_frequency=%d\nqualify_timeout=%s\n%s\n",
		name, name, responderIP, sipPort, freq, secs(timeout), extra)
}

// qualifydConf is the daemon's configuration: Asterisk's policy (N = 1)
// and the N-failure policy with a fast retry, as two AoRs whose contacts
// differ only in the user part.
func (s settings) qualifydConf() string {
	return "; qualifyd-lab lossy: two policies probing the same SIPp\n" +
		aorSection(proberN1, s.Frequency, s.Timeout, "") +
		aorSection(proberN3, s.Frequency, s.Timeout,
			fmt.Sprintf("qualify_failures=%d\nqualify_retry_interval=%s\n", s.Failures, secs(s.Retry)))
}

// simConf adds, for the predictions only, Kamailio's dispatcher as a
// qualifyd policy: a probe every interval whatever happened (retry and
// down interval F - T after a timeout keep the send-to-send rhythm),
// ds_probing_threshold failures, one success back (ds_inactive_threshold=1).
func (s settings) simConf() string {
	gap := time.Duration(s.Frequency)*time.Second - s.Timeout
	return s.qualifydConf() + aorSection(proberKam, s.Frequency, s.Timeout,
		fmt.Sprintf("qualify_failures=%d\nqualify_retry_interval=%s\nqualify_down_interval=%s\n", s.Failures, secs(gap), secs(gap)))
}

// writeFiles writes the configurations and the embedded lab files to
// s.Dir and returns the path of each by short name.
func (s settings) writeFiles() (map[string]string, error) {
	files := map[string]string{
		"qualifyd.conf":   s.qualifydConf(),
		"simulate.conf":   s.simConf(),
		"dispatcher.list": fmt.Sprintf("# setid uri flags priority\n1 sip:%s:%d 0 0\n", responderIP, sipPort),
	}
	for _, name := range []string{"prober.cfg", "options-200.xml"} {
		b, err := labFiles.ReadFile("lab/" + name)
		if err != nil {
			return nil, err
		}
		files[name] = string(b)
	}
	paths := map[string]string{}
	for name, body := range files {
		p := filepath.Join(s.Dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("write lab file: %w", err)
		}
		paths[name] = p
	}
	return paths, nil
}
