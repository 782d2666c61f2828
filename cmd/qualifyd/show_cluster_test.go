package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/api"
)

// fakeClusterAPI serves node b's view of a three-node cluster led by a,
// and the contacts of testdata/api_aors.json with the cluster's status
// and votes (but the last, unknown to the cluster), the second probed
// by other nodes only.
func fakeClusterAPI(t *testing.T) *httptest.Server {
	raw, err := os.ReadFile("testdata/api_aors.json")
	if err != nil {
		t.Fatal(err)
	}
	var aors struct{ AoRs []api.AoR }
	if err := json.Unmarshal(raw, &aors); err != nil {
		t.Fatal(err)
	}
	var cs []api.Contact
	for _, a := range aors.AoRs {
		cs = append(cs, a.Contacts...)
	}
	votes := [][]string{{"Unreachable", "Unreachable", "Unreachable"}, {"Reachable", "Reachable", "Unreachable"}}
	for i := range votes {
		cs[i].ClusterStatus = votes[i][0]
		cs[i].Votes = []api.Vote{{Node: "a", Status: votes[i][1]}, {Node: "b", Status: votes[i][2]}}
	}
	cs[1].Status, cs[1].NotProbedHere = "NonQualified", true // another node is its vantage
	contacts, _ := json.Marshal(map[string]any{"contacts": cs})
	at := func(h, m int) api.Time { return api.At(time.Date(1999, 12, 31, h, m, 0, 0, time.UTC)) }
	view, _ := json.Marshal(api.Cluster{Node: "b", InCluster: true, Leader: "a", Quorum: "majority", Vantages: 2,
		Members: []api.ClusterMember{
			{Name: "a", Up: true, Since: at(21, 0), Probes: 3},
			{Name: "b", Up: true, Since: at(21, 30), Probes: 3},
			{Name: "c", Since: at(23, 58)},
		},
		Disagree: []string{"c"}})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/cluster", func(w http.ResponseWriter, r *http.Request) { w.Write(view) })
	mux.HandleFunc("GET /api/v1/contacts", func(w http.ResponseWriter, r *http.Request) { w.Write(contacts) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// TestShowCluster pins `show cluster` and, in cluster mode, `show
// contacts` with and without --stats: the cluster's columns come after
// Asterisk's (and the statistics), "(not probed here)" last.
func TestShowCluster(t *testing.T) {
	srv := fakeClusterAPI(t)
	now := time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC)
	c := &apiClient{base: srv.URL, http: srv.Client()}
	var out bytes.Buffer
	if err := showCluster(t.Context(), c, &out, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_cluster.golden", out.Bytes())
	out.Reset()
	if err := show(t.Context(), c, "contacts", &out, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_contacts_cluster.golden", out.Bytes())
	out.Reset()
	if err := showStats(t.Context(), c, &out, now); err != nil {
		t.Fatal(err)
	}
	goldenFile(t, "show_contacts_stats_cluster.golden", out.Bytes())
}

// TestShowClusterStates: the lines that change with the node's place in
// the cluster: leading, out of the cluster, no leader, no disagreement.
func TestShowClusterStates(t *testing.T) {
	for _, tt := range []struct {
		view api.Cluster
		want []string
	}{
		{api.Cluster{Node: "a", InCluster: true, Leading: true, Leader: "a"},
			[]string{"   Leader:  a (this node)\n", "  Cluster:  in the cluster, leading: this node pushes the sinks\n", "Disagreeing: none\n"}},
		{api.Cluster{Node: "a"}, []string{"   Leader:  unknown (not in the cluster)\n", "  Cluster:  NOT in the cluster: "}},
		{api.Cluster{Node: "a", InCluster: true}, []string{"   Leader:  none\n", "  Cluster:  in the cluster\n"}},
	} {
		body, _ := json.Marshal(tt.view)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
		var out bytes.Buffer
		if err := showCluster(t.Context(), &apiClient{base: srv.URL, http: srv.Client()}, &out, time.Now()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%+v: no %q in\n%s", tt.view, w, out.String())
			}
		}
	}
}

// TestShowClusterCommand: `show cluster` takes no argument and no
// --stats; on a single node it is the API's 404, exit 1.
func TestShowClusterCommand(t *testing.T) {
	srv := fakeClusterAPI(t)
	var out, errb bytes.Buffer
	if code := run(t.Context(), []string{"show", "cluster", "--http", srv.URL}, &out, &errb); code != 0 || !strings.Contains(out.String(), "     Node:  b\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	single, _ := fakeAPI(t) // serves no /api/v1/cluster: as a node without a type=cluster section
	if code := run(t.Context(), []string{"show", "cluster", "--http", single.URL}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "GET /api/v1/cluster: 404 Not Found") {
		t.Fatalf("single node: exit %d, stderr %q", code, errb.String())
	}
	for _, args := range [][]string{{"show", "cluster", "a"}, {"show", "cluster", "--stats"}, {"show", "cluster", "--pending"}} {
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestREADMEShowCluster: docs/api.md's show cluster example is the
// command's output (testdata/show_cluster.golden).
func TestREADMEShowCluster(t *testing.T) {
	readmeExample(t, "qualifyd show cluster", "show_cluster.golden")
}
