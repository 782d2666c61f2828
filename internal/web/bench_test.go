package web

import (
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/enginetest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// BenchmarkServeContacts1M serves GET /api/v1/contacts at a million
// contacts into a writer that discards the body. Besides B/op it reports
// lock-wait-s, the longest a stand-in for the scheduler, taking the
// engine's lock every millisecond, waited for it meanwhile (as
// engine.BenchmarkReload1M), peak-live-MB, how far the live heap (as the
// latest collection marked it) grew above the loaded engine's, and
// body-MB, the reply's size. Run it with -benchtime=3x.
func BenchmarkServeContacts1M(b *testing.B) { serve1M(b, "/api/v1/contacts") }

// serve1M serves GET path at a million contacts b.N times and reports
// the metrics of BenchmarkServeContacts1M.
func serve1M(b *testing.B, path string) {
	e := loaded1M(b)
	srv, err := New(Config{Engine: e})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	b.ReportAllocs()
	stop := watch(e)
	var w discard
	for b.Loop() {
		w = discard{header: http.Header{}}
		h.ServeHTTP(&w, httptest.NewRequest("GET", path, nil))
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	}
	wait, peak := stop()
	b.ReportMetric(wait.Seconds(), "lock-wait-s")
	b.ReportMetric(float64(peak)/1e6, "peak-live-MB")
	b.ReportMetric(float64(w.n)/1e6, "body-MB")
}

// loaded1M returns an engine, not running, with a million AoRs of one
// contact each.
func loaded1M(b *testing.B) *engine.Engine {
	e, _ := loaded(b, 1_000_000)
	return e
}

// loaded returns an engine, not running, with n AoRs of one contact
// each, and the AoRs.
func loaded(b *testing.B, n int) (*engine.Engine, []engine.AoR) {
	e, err := engine.New(engine.Config{Prober: &fakeProber{script: map[string]reply{}}})
	if err != nil {
		b.Fatal(err)
	}
	aors := enginetest.NumberedAoRs(n, qualify.DefaultPolicy())
	if err := e.Apply(aors); err != nil {
		b.Fatal(err)
	}
	return e, aors
}

// watch starts enginetest.WatchLock over e's Summary, sampling the live
// heap after each lock. The returned stop ends it and returns the longest
// wait for the lock and the live heap's largest growth.
func watch(e *engine.Engine) (stop func() (time.Duration, uint64)) {
	heap := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(heap)
	base := heap[0].Value.Uint64()
	var peak atomic.Uint64
	wait := enginetest.WatchLock(func() { _ = e.Summary() }, func() {
		metrics.Read(heap)
		peak.Store(max(peak.Load(), heap[0].Value.Uint64()-min(base, heap[0].Value.Uint64())))
	})
	return func() (time.Duration, uint64) {
		w := wait()
		return w, peak.Load()
	}
}

// discard is a ResponseWriter that counts and drops the body.
type discard struct {
	header http.Header
	status int
	n      int64
}

func (d *discard) Header() http.Header  { return d.header }
func (d *discard) WriteHeader(code int) { d.status = code }
func (d *discard) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	return len(p), nil
}

// BenchmarkPage1M serves the status page, GET /, at a million contacts,
// with the metrics of BenchmarkServeContacts1M.
func BenchmarkPage1M(b *testing.B) { serve1M(b, "/") }

// BenchmarkPage1000 serves GET /?limit=1000 at 1000 AoRs of one contact,
// each with a full history (a day of minute buckets, 200 changes), and
// reports body-MB, the page's size, plain and gzipped.
func BenchmarkPage1000(b *testing.B) {
	e, aors := loaded(b, 1000)
	hist := fakeHistory{}
	end := time.Now()
	for i, a := range aors {
		var outages []spell
		for k := range 100 { // 200 changes
			outages = append(outages, spell{k*14 + i%7, k*14 + i%7 + 3})
		}
		hist[a.Name] = synthHistory(shape{aor: a.Name, uri: a.Contacts[0], end: end, width: time.Minute, n: 1440,
			probes: 2, base: 20 * time.Millisecond, outages: outages, lossy: []spell{{700, 760}}, seed: uint64(i)})
	}
	srv, err := New(Config{Engine: e, History: hist})
	if err != nil {
		b.Fatal(err)
	}
	for _, enc := range []string{"identity", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			h := srv.Handler()
			b.ReportAllocs()
			var w discard
			for b.Loop() {
				w = discard{header: http.Header{}}
				r := httptest.NewRequest("GET", "/?limit=1000", nil)
				r.Header.Set("Accept-Encoding", enc)
				h.ServeHTTP(&w, r)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
			b.ReportMetric(float64(w.n)/1e6, "body-MB")
		})
	}
}
