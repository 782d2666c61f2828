package web

import (
	"strconv"
	"sync"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// summaryData is the summary strip atop the pages.
type summaryData struct {
	Version, Now                 string
	AoRs, Available, Unavailable int
	Contacts                     int
	ByStatus                     []statusCount // worst first
	// Draining counts the contacts whose peer asked for a pause
	// (qualify-semantics §11.4), shown only when some are.
	Draining int
	// Rate and Loss are the probes a second and the share failed over
	// the recent Window; empty when unknown.
	Rate, Loss, Window string
	// Sinks are the routers' states, in configuration order.
	Sinks []sinkTile
	// Panic is set while qualifyd panics (the sinks push only ups), or
	// while downs wait for a panic (the lower mark).
	Panic *sink.Panic
	// Cluster is set in cluster mode.
	Cluster *clusterTile
}

// clusterTile is the cluster in the summary: whether this node is in it,
// how many nodes are up, and who leads.
type clusterTile struct {
	api.Cluster
	Up int // members up
	// Bad marks a node out of the cluster, or a cluster without a
	// leader: nobody pushes the sinks then.
	Bad bool
}

// newClusterTile is v's tile.
func newClusterTile(v api.Cluster) *clusterTile {
	t := &clusterTile{Cluster: v, Bad: !v.InCluster || v.Leader == ""}
	for _, m := range v.Members {
		if m.Up {
			t.Up++
		}
	}
	return t
}

// sinkTile is one sink in the summary: whether routing follows qualifyd
// there.
type sinkTile struct {
	Name, Driver string
	// State is "✕ down", "N pending", "✓ in step", or "– no request yet"
	// (a webhook with nothing to deliver); Bad marks the first two.
	State string
	Bad   bool
	// Error is the router's last error, for the tile's tooltip.
	Error string
}

// newSinkTile is st's tile.
func newSinkTile(st sink.Status) sinkTile {
	t := sinkTile{Name: st.Name, Driver: st.Driver, Error: st.LastError}
	switch {
	case !st.Up && st.LastError == "" && st.LastSuccess.IsZero():
		t.State = "– no request yet"
	case !st.Up:
		t.State, t.Bad = "✕ down", true
	case st.Pending > 0:
		t.State, t.Bad = strconv.Itoa(st.Pending)+" pending", true
	default:
		t.State = "✓ in step"
	}
	return t
}

// summary returns the strip from the engine's kept counts, which cost no
// walk of the table.
func (s *Server) summary(now time.Time) summaryData {
	sum := s.cfg.Engine.Summary()
	d := summaryData{Version: s.cfg.Version, Now: now.UTC().Format(time.DateTime) + " UTC", AoRs: sum.AoRs,
		Available: sum.AoRsAvailable, Unavailable: sum.AoRs - sum.AoRsAvailable}
	n := make([]int, len(statusOrder))
	for k, st := range statusOrder {
		n[k] = sum.ByStatus[st]
		d.Contacts += n[k]
	}
	d.ByStatus = statusCounts(n)
	d.Draining = sum.Draining
	if s.cfg.Sinks != nil {
		for _, st := range s.cfg.Sinks.Status() {
			d.Sinks = append(d.Sinks, newSinkTile(st))
		}
		if p := s.cfg.Sinks.Panic(); p.Active || p.Waiting {
			d.Panic = &p
		}
	}
	if v, ok := s.clusterView(); ok {
		d.Cluster = newClusterTile(v)
	}
	if c, ok := s.cfg.Engine.(counterSource); ok {
		if r, ok := s.rates.observe(now, c.Counters()); ok {
			d.Rate = strconv.FormatFloat(r.perSecond, 'f', 1, 64)
			d.Window = r.window.Round(time.Second).String()
			if r.probes > 0 {
				d.Loss = percent(int(r.failures), int(r.probes))
			}
		}
	}
	return d
}

// counterSource is the engine's probe totals, *engine.Engine's Counters.
type counterSource interface {
	Counters() engine.Counters
}

// rateWindowMin is the shortest window the summary's rates cover.
const rateWindowMin = 10 * time.Second

// rateWindow turns the engine's probe totals into recent rates: it keeps
// two samples, the newer at least rateWindowMin after the older, and
// measures from the older. Safe for concurrent use; the zero value is
// ready.
type rateWindow struct {
	mu        sync.Mutex
	prev, cur probeSample
}

// probeSample is the probe totals at one instant.
type probeSample struct {
	at               time.Time
	probes, failures uint64
}

// rates are the probes over a window, and their rate.
type rates struct {
	window           time.Duration
	probes, failures uint64
	perSecond        float64
}

// observe records c at now and returns the rates since the older sample;
// false on the first call.
func (r *rateWindow) observe(now time.Time, c engine.Counters) (rates, bool) {
	s := probeSample{at: now}
	for reason, n := range c.Probes {
		s.probes += n
		if qualify.Reason(reason) != qualify.ReasonNone {
			s.failures += n
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur.at.IsZero() {
		r.prev, r.cur = s, s
		return rates{}, false
	}
	if now.Sub(r.cur.at) >= rateWindowMin {
		r.prev, r.cur = r.cur, s
	}
	w := now.Sub(r.prev.at)
	if w <= 0 {
		return rates{}, false
	}
	out := rates{window: w, probes: s.probes - r.prev.probes, failures: s.failures - r.prev.failures}
	out.perSecond = float64(out.probes) / w.Seconds()
	return out, true
}
