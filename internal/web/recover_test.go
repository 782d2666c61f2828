package web

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/qualifyd/qualifyd/internal/engine"
)

// panicEngine is a real engine whose ContactsPage panics.
type panicEngine struct{ Engine }

func newPanicEngine(t *testing.T) panicEngine {
	t.Helper()
	e, err := engine.New(engine.Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	return panicEngine{e}
}

func (panicEngine) ContactsPage([]engine.ContactSnapshot, string, int) ([]engine.ContactSnapshot, bool) {
	panic("boom")
}

func TestPanicAnswers500(t *testing.T) {
	var logs bytes.Buffer
	panics := 0
	srv, err := New(Config{Engine: newPanicEngine(t), Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Panicked: func() { panics++ }})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	srv.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/contacts", nil))
	if w.Code != 500 || w.Body.String() != `{"error":"internal error"}`+"\n" {
		t.Fatalf("got %d %q", w.Code, w.Body)
	}
	if panics != 1 || !strings.Contains(logs.String(), "panic=boom") {
		t.Fatalf("panics %d, log %q", panics, logs.String())
	}
}

func TestAbortHandlerIsReraised(t *testing.T) {
	srv, err := New(Config{Engine: newPanicEngine(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.recover(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) }))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}

func TestPanicAfterWriteKeepsStatus(t *testing.T) {
	srv, err := New(Config{Engine: newPanicEngine(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.recover(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("partial"))
		panic("late")
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 200 || w.Body.String() != "partial" {
		t.Fatalf("got %d %q", w.Code, w.Body)
	}
}
