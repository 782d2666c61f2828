package daemon

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/source"
)

// countingDriver returns the same list at every read, and counts them.
type countingDriver struct {
	reads *atomic.Int32
	list  []pjsip.Object
}

func (c countingDriver) Read(context.Context) ([]pjsip.Object, error) {
	c.reads.Add(1)
	return c.list, nil
}

// TestSourcesRefreshFollowsAReload: a reload that shortens a source's
// refresh_interval takes effect from the reload on, not once the longer
// interval it had is over.
func TestSourcesRefreshFollowsAReload(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var reads atomic.Int32
		list := []pjsip.Object{{Type: "aor", Name: "gw1", Options: []pjsip.KeyValue{{Key: "contact", Value: "sip:192.0.2.1"}}}}
		k := &source.Keeper{Driver: func(*pjsip.Source) (source.Driver, error) { return countingDriver{&reads, list}, nil }}
		log, err := newLog(io.Discard, "text", nil, defaultLogBuffer)
		if err != nil {
			t.Fatal(err)
		}
		defer log.Close(logBound)
		d := &Daemon{log: log, sources: k, sourcesSet: make(chan struct{}, 1)}
		apply := func(every time.Duration) {
			t.Helper()
			r := k.Round(t.Context(), true, false)
			if _, err := r.Import(&pjsip.Source{Name: "edge", Driver: "kamailio", URL: "http://127.0.0.1:5071/RPC", RefreshInterval: every}); err != nil {
				t.Fatal(err)
			}
			d.commitSources(r)
		}
		apply(time.Hour)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { d.refreshSources(ctx); close(done) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := reads.Load(); n != 1 {
			t.Fatalf("%d reads within a minute of a refresh_interval of 1 h, want the start's alone", n)
		}
		apply(10 * time.Second) // the reload's read: 2
		time.Sleep(11 * time.Second)
		synctest.Wait()
		if n := reads.Load(); n != 3 {
			t.Fatalf("%d reads 11 s after a reload to refresh_interval 10 s, want 3 (start, reload, refresh)", n)
		}
		cancel()
		<-done
	})
}
