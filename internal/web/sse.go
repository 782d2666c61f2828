package web

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Run is the event pump: it adds every engine event to the replay ring
// until ctx is cancelled, then unsubscribes and ends the event streams so
// that http.Server.Shutdown can complete. Call it once. Events the pump
// falls behind on are lost to the ring; streams see a gap event.
func (s *Server) Run(ctx context.Context) {
	sub := s.sub
	defer s.ring.close()
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.C:
			if !ok {
				return
			}
			s.ring.push(encodeEvent(ev))
		}
	}
}

// streamWriteWait is how long one write to an event stream may block
// before the client is dropped (it reconnects and replays).
const streamWriteWait = 10 * time.Second

// stream is one client's event stream.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cursor uint64 // last event id sent or replayed from
	live   bool   // no Last-Event-ID: accept the first event as it comes
}

// events serves GET /api/v1/events as Server-Sent Events, replaying from
// the Last-Event-ID header or the last_event_id query parameter.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	last, replay, err := lastEventID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !s.takeStream(w) {
		return
	}
	defer func() { <-s.streams }()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // let reverse proxies stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	st := &stream{w: w, rc: http.NewResponseController(w)}
	if err := s.start(st, last, replay); err != nil {
		return
	}
	s.pump(r.Context(), st)
}

// streamRetryAfter is the Retry-After, in seconds, of a stream refused
// because the server serves cfg.MaxStreams already.
const streamRetryAfter = "10"

// takeStream takes one of the cfg.MaxStreams slots for a new stream, or
// answers 503 and counts the refusal; the caller gives a taken slot back
// with <-s.streams when the stream ends.
func (s *Server) takeStream(w http.ResponseWriter) bool {
	select {
	case s.streams <- struct{}{}:
		return true
	default:
	}
	if s.cfg.StreamRefused != nil {
		s.cfg.StreamRefused()
	}
	w.Header().Set("Retry-After", streamRetryAfter)
	writeError(w, http.StatusServiceUnavailable, "too many event streams: "+
		strconv.Itoa(cap(s.streams))+" open, the most this server serves; retry later")
	return false
}

// lastEventID reads the id to replay after; replay is false without one.
func lastEventID(r *http.Request) (id uint64, replay bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("last_event_id")
	}
	if v == "" {
		return 0, false, nil
	}
	id, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false, errors.New("bad Last-Event-ID " + quote(v) + ": want a decimal event id")
	}
	return id, true, nil
}

// start places st's cursor: at the newest event for a live client, else
// at last; pump sends a gap event if the ring no longer holds last+1. An
// id newer than any published comes from another process (the engine's
// numbers never repeat across restarts, engine.Config.Seq): the client
// gets a gap event at once and everything kept.
func (s *Server) start(st *stream, last uint64, replay bool) error {
	first, newest := s.ring.bounds()
	switch {
	case !replay:
		st.cursor, st.live = newest, true
	case last > newest:
		st.cursor = max(first, 1) - 1
		return st.write(gapFrame(last, first))
	default:
		st.cursor = last
	}
	return st.flush()
}

// pump writes the ring's new frames to st until the client leaves, a write
// fails, or the ring is closed; it sends heartbeats while idle.
func (s *Server) pump(ctx context.Context, st *stream) {
	tick := time.NewTicker(s.cfg.Heartbeat)
	defer tick.Stop()
	for {
		fs, wake, closed := s.ring.since(st.cursor)
		if err := st.send(fs); err != nil || closed {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
			if st.write([]byte(": heartbeat\n\n")) != nil {
				return
			}
		}
	}
}

// send writes fs, preceded by a gap event where ids are missing.
func (st *stream) send(fs []frame) error {
	for _, f := range fs {
		if !st.live && f.seq != st.cursor+1 {
			if err := st.write(gapFrame(st.cursor, f.seq)); err != nil {
				return err
			}
		}
		st.live = false
		if err := st.write(f.data); err != nil {
			return err
		}
		st.cursor = f.seq
	}
	return nil
}

// write writes and flushes b with a fresh write deadline; a client that
// does not read for streamWriteWait is dropped.
func (st *stream) write(b []byte) error {
	extendWrite(st.w, streamWriteWait)
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	return st.flush()
}

func (st *stream) flush() error {
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
