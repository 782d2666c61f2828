package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// BenchmarkKamailioRead100k is one read of a dispatcher.list of 100,000
// destinations over JSON-RPC, from a loopback server: the call the
// kamailio source makes every refresh_interval and the kamailio sink
// at connect and every resync_interval.
func BenchmarkKamailioRead100k(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"NRSETS":1,"RECORDS":[{"SET":{"ID":1,"TARGETS":[`)
	for i := range 100_000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"DEST":{"URI":"sip:10.%d.%d.%d:5060","FLAGS":"AP","PRIORITY":0,"ATTRS":{"BODY":"duid=gw%d","DUID":"gw%d"}}}`,
			i>>16&255, i>>8&255, i&255, i, i)
	}
	sb.WriteString(`]}}]}}`)
	body := sb.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	d, err := New(&pjsip.Source{Name: "edge", Driver: "kamailio", URL: srv.URL, Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(body)), "response-B")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}
