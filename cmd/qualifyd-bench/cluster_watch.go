package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// nodeLog reads one daemon's text log as it is written: it counts the
// Reachable lines, the node's own and the cluster's, and keeps the time
// of every Unreachable line by contact key (AOR/URI), the node's own
// (`Contact K is now Unreachable.`) and the cluster's (`qualifyd:
// cluster: Contact K is now Unreachable (...)`). Times are the lines'
// stamps, to the millisecond.
type nodeLog struct {
	mu          sync.Mutex
	part        []byte // an incomplete last line
	ownUp       int
	clusterUp   int
	ownDown     map[string]time.Time
	clusterDown map[string]time.Time
	leading     bool      // the last leadership line said this node leads
	leadAt      time.Time // that line's stamp
}

// The daemon's lines at its leadership edges.
const (
	leadsLine   = "qualifyd: cluster: this node leads"
	stoppedLine = "qualifyd: cluster: this node stopped leading"
)

func newNodeLog() *nodeLog {
	return &nodeLog{ownDown: map[string]time.Time{}, clusterDown: map[string]time.Time{}}
}

// Write files each complete line.
func (l *nodeLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, b...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			break
		}
		l.line(string(l.part[:i]))
		l.part = l.part[i+1:]
	}
	l.part = append([]byte(nil), l.part...)
	return len(b), nil
}

// line files one line; l.mu is held.
func (l *nodeLog) line(s string) {
	if at, ok := leadEdge(s, leadsLine); ok {
		l.leading, l.leadAt = true, at
		return
	}
	if _, ok := leadEdge(s, stoppedLine); ok {
		l.leading = false
		return
	}
	at, key, cluster, down, ok := parseStatusLine(s)
	switch {
	case !ok:
	case down && cluster:
		l.clusterDown[key] = at
	case down:
		l.ownDown[key] = at
	case cluster:
		l.clusterUp++
	default:
		l.ownUp++
	}
}

// leadEdge reads "[STAMP] " + prefix...; ok false for another line.
func leadEdge(s, prefix string) (time.Time, bool) {
	if len(s) < len(stampLayout)+3 || !strings.HasPrefix(s[len(stampLayout)+3:], prefix) {
		return time.Time{}, false
	}
	at, err := time.ParseInLocation(stampLayout, s[1:len(stampLayout)+1], time.Local)
	return at, err == nil
}

// leads reports whether the log's last leadership line says the node
// leads, and that line's stamp.
func (l *nodeLog) leads() (bool, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading, l.leadAt
}

// stampLayout is the text log's timestamp.
const stampLayout = "2006-01-02 15:04:05.000"

// parseStatusLine reads "[STAMP] Contact K is now S..." and "[STAMP]
// qualifyd: cluster: Contact K is now S (...)"; ok false for any other
// line.
func parseStatusLine(s string) (at time.Time, key string, cluster, down, ok bool) {
	if len(s) < len(stampLayout)+3 || s[0] != '[' || s[len(stampLayout)+1] != ']' {
		return at, "", false, false, false
	}
	at, err := time.ParseInLocation(stampLayout, s[1:len(stampLayout)+1], time.Local)
	if err != nil {
		return at, "", false, false, false
	}
	rest := s[len(stampLayout)+3:]
	rest, cluster = strings.CutPrefix(rest, "qualifyd: cluster: ")
	rest, ok = strings.CutPrefix(rest, "Contact ")
	if !ok {
		return at, "", false, false, false
	}
	key, status, ok := strings.Cut(rest, " is now ")
	switch {
	case !ok:
	case strings.HasPrefix(status, "Unreachable"):
		return at, key, cluster, true, true
	case strings.HasPrefix(status, "Reachable"):
		return at, key, cluster, false, true
	}
	return at, "", false, false, false
}

// counts returns the Reachable and Unreachable lines seen so far.
func (l *nodeLog) counts() (ownUp, clusterUp, ownDown, clusterDown int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ownUp, l.clusterUp, len(l.ownDown), len(l.clusterDown)
}

// downTimes returns copies of the Unreachable lines' times.
func (l *nodeLog) downTimes() (own, cluster map[string]time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	own, cluster = make(map[string]time.Time, len(l.ownDown)), make(map[string]time.Time, len(l.clusterDown))
	for k, v := range l.ownDown {
		own[k] = v
	}
	for k, v := range l.clusterDown {
		cluster[k] = v
	}
	return own, cluster
}

// hookStats is what the receiver got from one node's webhook sink.
type hookStats struct {
	First       time.Time // the first body, change or heartbeat
	FirstChange time.Time
	LastChange  time.Time
	Changes     int // change bodies
	Changed     int // of them, those whose "to" differs from what the receiver held
	Beats       int // heartbeat bodies
}

// hookReceiver is the webhook receiver of every node: node NAME's sink
// posts to /hook/NAME. It holds each object's last delivered level, as
// a router would, whichever node delivered it.
type hookReceiver struct {
	srv  *http.Server
	base string // http://127.0.0.1:PORT/hook/

	mu    sync.Mutex
	held  map[string]string // object -> level
	down  int               // contacts held down
	stats map[string]*hookStats
}

// startHookReceiver serves on a free loopback port.
func startHookReceiver() (*hookReceiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &hookReceiver{base: "http://" + l.Addr().String() + "/hook/", held: map[string]string{}, stats: map[string]*hookStats{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook/{node}", h.serve)
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = h.srv.Serve(l) }()
	return h, nil
}

// reset forgets every object and node, as a new router would hold
// nothing: each cluster run starts from it.
func (h *hookReceiver) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held, h.down, h.stats = map[string]string{}, 0, map[string]*hookStats{}
}

// hookBody is the part of a change or heartbeat the receiver reads.
type hookBody struct {
	Kind     string `json:"kind"`
	AoR      string `json:"aor"`
	URI      string `json:"uri"`
	Endpoint string `json:"endpoint"`
	To       string `json:"to"`
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	var b hookBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.record(r.PathValue("node"), b, time.Now())
}

// record files one body from node.
func (h *hookReceiver) record(node string, b hookBody, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stats[node]
	if st == nil {
		st = &hookStats{First: now}
		h.stats[node] = st
	}
	if b.Kind == "heartbeat" {
		st.Beats++
		return
	}
	if st.Changes == 0 {
		st.FirstChange = now
	}
	st.Changes++
	st.LastChange = now
	key := b.Kind + "|" + b.AoR + "|" + b.URI + "|" + b.Endpoint
	if old := h.held[key]; old != b.To {
		st.Changed++
		if b.Kind == "contact" {
			h.down += btoi(b.To == "down") - btoi(old == "down")
		}
	}
	h.held[key] = b.To
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// node returns a copy of node's stats (zero before its first body).
func (h *hookReceiver) node(name string) hookStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.stats[name]; st != nil {
		return *st
	}
	return hookStats{}
}

// heldDown returns how many contacts the receiver holds down.
func (h *hookReceiver) heldDown() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.down
}

func (h *hookReceiver) close() { _ = h.srv.Close() }
