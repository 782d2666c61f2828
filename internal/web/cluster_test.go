package web

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/qualifyd/qualifyd/internal/api"
	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// fakeCluster stands for the daemon's cluster hooks: a fixed view, and
// the votes of the contacts it knows (by AoR/URI). It counts the calls of
// Votes. Safe for concurrent use.
type fakeCluster struct {
	view  api.Cluster
	mu    sync.Mutex
	votes map[string]fakeVotes
	calls int
}

// fakeVotes are the cluster's status of one contact and its votes.
type fakeVotes struct {
	status qualify.Status
	votes  []api.Vote
}

// Cluster is Config.Cluster.
func (f *fakeCluster) Cluster() (api.Cluster, bool) { return f.view, true }

// Votes is Config.Votes.
func (f *fakeCluster) Votes(aor, uri string) (qualify.Status, []api.Vote, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	v, ok := f.votes[aor+"/"+uri]
	return v.status, v.votes, ok
}

// set makes the contact aor/uri's cluster status st, with the votes
// given as node, status pairs.
func (f *fakeCluster) set(aor, uri string, st qualify.Status, votes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := fakeVotes{status: st}
	for i := 0; i+1 < len(votes); i += 2 {
		v.votes = append(v.votes, api.Vote{Node: votes[i], Status: votes[i+1]})
	}
	f.votes[aor+"/"+uri] = v
}

// config returns f's hooks in a Config.
func (f *fakeCluster) config(cfg Config) Config {
	cfg.Cluster, cfg.Votes = f.Cluster, f.Votes
	return cfg
}

// threeNodes is node b's view of a cluster of a, b and c led by a, c
// down since 11:58, with c's file assigning other AoRs.
func threeNodes() *fakeCluster {
	at := func(h, m int) api.Time { return api.At(time.Date(2026, 12, 1, h, m, 0, 0, time.UTC)) }
	f := &fakeCluster{votes: map[string]fakeVotes{}, view: api.Cluster{
		Node: "b", InCluster: true, Leader: "a", Quorum: "majority", Vantages: 3,
		Members: []api.ClusterMember{
			{Name: "a", Up: true, Since: at(9, 0), Probes: 5},
			{Name: "b", Up: true, Since: at(9, 1), Probes: 5},
			{Name: "c", Since: at(11, 58)},
		},
		Disagree: []string{"c"},
	}}
	// pbx07 seen down from b only; carrier's gw2 down from a and b; gw3
	// unknown to the cluster (no fields); backup and phone agreed.
	f.set("pbx07", pbx07URI, qualify.Reachable, "a", "Reachable", "b", "Unreachable")
	f.set("carrier", gw2URI, qualify.Unreachable, "a", "Unreachable", "b", "Unreachable")
	f.set("backup", bakURI, qualify.Unreachable, "a", "Unreachable", "b", "Unreachable")
	f.set("phone", phoneURI, qualify.NonQualified, "a", "NonQualified", "b", "NonQualified")
	return f
}

// TestClusterGolden pins, in cluster mode, GET /api/v1/cluster and the
// contacts of the listings and of one AoR: each carries the cluster's
// status and its votes, but a contact the cluster does not know (gw3).
func TestClusterGolden(t *testing.T) {
	checkGETs(t, func() Config { return threeNodes().config(Config{Version: "test"}) }, []goldenGET{
		{"cluster.golden", "/api/v1/cluster"},
		{"contacts_cluster.golden", "/api/v1/contacts"},
		{"aor_cluster.golden", "/api/v1/aors/carrier"},
		{"aors_cluster.golden", "/api/v1/aors?limit=1"},
	})
}

// goldenGET is a GET target and the golden file of its reply.
type goldenGET struct{ name, target string }

// checkGETs checks each GET's reply in the reference scenario at 9 s,
// served with the configuration cfg returns, against its golden file.
func checkGETs(t *testing.T, cfg func() Config, gets []goldenGET) {
	for _, tt := range gets {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := scenarioEnv(t, cfg())
				checkGolden(t, tt.name, response(t, v.do("GET", tt.target)))
			})
		})
	}
}

// TestClusterRoute: GET /api/v1/cluster answers the hook's view, with
// empty lists as [] rather than null; it refuses parameters; and it is a
// 404 without the hook or when the hook says this is no cluster.
func TestClusterRoute(t *testing.T) {
	notCluster := `{"error":"not a cluster: qualifyd runs without a type=cluster section"}` + "\n"
	alone := func() (api.Cluster, bool) {
		return api.Cluster{Node: "a", Quorum: "any", Vantages: 1}, true
	}
	tests := []struct {
		name    string
		cluster func() (api.Cluster, bool)
		target  string
		code    int
		body    string
	}{
		{"no hook", nil, "/api/v1/cluster", 404, notCluster},
		{"not a cluster", func() (api.Cluster, bool) { return api.Cluster{Node: "x"}, false }, "/api/v1/cluster", 404, notCluster},
		{"lost NATS, nothing seen", alone, "/api/v1/cluster", 200,
			`{"node":"a","in_cluster":false,"leading":false,"leader":"","quorum":"any","vantages":1,"members":[],"disagree":[],"foreign":[],"store_error":""}` + "\n"},
		{"a parameter", alone, "/api/v1/cluster?node=b", 400, `{"error":"unknown parameter \"node\": the route takes none"}` + "\n"},
		{"bad query", alone, "/api/v1/cluster?%zz", 400, `{"error":"bad query: invalid URL escape \"%zz\""}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newEnv(t, Config{Cluster: tt.cluster}, engine.Config{})
				w := v.do("GET", tt.target)
				if w.Code != tt.code || w.Body.String() != tt.body || w.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("got %d %q %q, want %d %q", w.Code, w.Body, w.Header().Get("Content-Type"), tt.code, tt.body)
				}
			})
		})
	}
	synctest.Test(t, func(t *testing.T) {
		v := newEnv(t, Config{Cluster: alone}, engine.Config{})
		if w := v.do("POST", "/api/v1/cluster"); w.Code != 405 || w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("POST: %d, Allow %q", w.Code, w.Header().Get("Allow"))
		}
	})
}

// TestNotClusterUnchanged: with both hooks set and saying this is no
// cluster, every read route and page is its single-node golden, byte for
// byte.
func TestNotClusterUnchanged(t *testing.T) {
	no := Config{Version: "test",
		Cluster: func() (api.Cluster, bool) { return api.Cluster{}, false },
		Votes: func(string, string) (qualify.Status, []api.Vote, bool) {
			return qualify.Reachable, []api.Vote{{Node: "a"}}, false
		},
	}
	checkGETs(t, func() Config { return no }, []goldenGET{
		{"contacts.golden", "/api/v1/contacts"},
		{"aors.golden", "/api/v1/aors"},
		{"aor.golden", "/api/v1/aors/backup"},
		{"page.golden", "/"},
		{"page_aor.golden", "/aors/carrier"},
	})
}

// TestVotesOncePerContact: a full listing asks the Votes hook once per
// contact listed, in the streaming pages, and the status filter before
// asking.
func TestVotesOncePerContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeNodes()
		v := scenarioEnv(t, f.config(Config{}))
		for _, tt := range []struct {
			target string
			calls  int
		}{
			{"/api/v1/contacts", 5},
			{"/api/v1/contacts?status=Reachable", 1},
			{"/api/v1/aors", 5},
			{"/api/v1/aors/carrier", 2},
		} {
			f.calls = 0
			if w := v.do("GET", tt.target); w.Code != 200 || f.calls != tt.calls {
				t.Errorf("%s: %d, %d calls of Votes, want %d", tt.target, w.Code, f.calls, tt.calls)
			}
		}
	})
}

// TestPageCluster: in cluster mode the summary has the cluster tile
// (in the cluster or not, nodes up, the leader), and the AoR page a
// cluster column with the cluster's status and a dot per vantage
// coloured by its vote; "–" for a contact the cluster does not know.
func TestPageCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeNodes()
		v := scenarioEnv(t, f.config(Config{}))
		page := v.do("GET", "/").Body.String()
		for _, want := range []string{
			`<a class="tile" href="/api/v1/cluster" data-cluster title="node b; an Unreachable verdict needs majority of a contact's 3 vantages"><b>✓ in cluster</b> 2 of 3 nodes up · leader a</a>`,
		} {
			if !strings.Contains(page, want) {
				t.Errorf("page without %s", want)
			}
		}
		if summary := v.do("GET", "/?fragment=summary").Body.String(); !strings.Contains(summary, "2 of 3 nodes up") {
			t.Errorf("summary fragment without the cluster tile:\n%s", summary)
		}
		aor := v.do("GET", "/aors/carrier").Body.String()
		for _, want := range []string{
			`<th title="the cluster's status, then each live vantage's vote">cluster · votes</th>`,
			`<td class="cluster"><span class="c-Unreachable">Unreachable</span> <span class="votes"><span class="vote v-Unreachable" title="a: Unreachable">a</span><span class="vote v-Unreachable" title="b: Unreachable">b</span></span></td>`,
			`<td class="cluster">–</td>`,
		} {
			if !strings.Contains(aor, want) {
				t.Errorf("AoR page without %s", want)
			}
		}
		f.view.InCluster, f.view.Leader, f.view.Leading = false, "", false
		if page := v.do("GET", "/").Body.String(); !strings.Contains(page, `<a class="tile bad" href="/api/v1/cluster"`) ||
			!strings.Contains(page, "<b>✕ not in cluster</b> 2 of 3 nodes up · leader none") ||
			!strings.Contains(page, "it shows its own view and pushes nothing") {
			t.Errorf("page of a node out of the cluster:\n%s", page)
		}
		f.view.InCluster, f.view.Leader, f.view.Leading = true, "b", true
		if page := v.do("GET", "/").Body.String(); !strings.Contains(page, "leader b (this node)") {
			t.Errorf("page of the leader:\n%s", page)
		}
	})
}

// TestBrowserClusterVotes: in cluster mode the page shows the cluster
// tile, and an AoR's page a dot per vantage; when this node's peer dies
// its own dot turns Unreachable on the open page, from the event stream,
// while the cluster's status, held by the two other vantages, stays
// Reachable.
func TestBrowserClusterVotes(t *testing.T) {
	view := api.Cluster{Node: "a", InCluster: true, Leader: "b", Quorum: "majority", Vantages: 3,
		Members: []api.ClusterMember{{Name: "a", Up: true}, {Name: "b", Up: true}, {Name: "c", Up: true}}}
	s := startSiteWith(t, func(e *engine.Engine) Config {
		return Config{
			Cluster: func() (api.Cluster, bool) { return view, true },
			Votes:   func(aor, uri string) (qualify.Status, []api.Vote, bool) { return majority(e, aor, uri) },
		}
	}, nil, "alpha")
	b := newBrowser(t, 1280, 900)
	b.do(chromedp.Navigate(s.url+"/"), wait(`.tile[data-cluster]`))
	if got := b.text(`.tile[data-cluster]`); got != "✓ in cluster 3 of 3 nodes up · leader b" {
		t.Errorf("cluster tile %q", got)
	}
	alpha := `.detail[data-aor="alpha"]`
	b.do(chromedp.Navigate(s.url+"/aors/alpha"), wait(alpha+` .vote.v-Reachable`), wait(`#live.on`))
	if n := b.count(alpha + ` .vote.v-Reachable`); n != 3 {
		t.Errorf("%d Reachable votes, want 3", n)
	}
	s.peers["alpha"].dead.Store(true)
	b.do(wait(alpha + ` .vote.v-Unreachable`))
	dots := eval[string](b, `Array.from(document.querySelectorAll('.detail .vote'), e => e.textContent + ':' + e.className).join(' ')`)
	if dots != "a:vote v-Unreachable b:vote v-Reachable c:vote v-Reachable" {
		t.Errorf("votes %q", dots)
	}
	if got := b.text(alpha + ` td.cluster .c-Reachable`); got != "Reachable" {
		t.Errorf("cluster status %q, want Reachable", got)
	}
	t.Logf("screenshot %s", b.screenshot(t.ArtifactDir(), "cluster-votes.png"))
	b.noErrors()
}

// majority is a cluster of a, b and c where a is this node (its vote is
// the engine's status of the contact) and b and c say Reachable: a
// majority, so the cluster's status is Reachable whatever a says.
func majority(e *engine.Engine, aor, uri string) (qualify.Status, []api.Vote, bool) {
	a, ok := e.AoR(aor)
	if !ok {
		return 0, nil, false
	}
	for _, c := range a.Contacts {
		if c.URI == uri {
			return qualify.Reachable, []api.Vote{{Node: "a", Status: c.Status.String()},
				{Node: "b", Status: "Reachable"}, {Node: "c", Status: "Reachable"}}, true
		}
	}
	return 0, nil, false
}

// TestSinksAndSourcesRefuseParameters: the sinks' and the sources'
// listings take no parameter, and refuse a misspelt one as the other
// routes do.
func TestSinksAndSourcesRefuseParameters(t *testing.T) {
	for _, target := range []string{"/api/v1/sinks?pending=1", "/api/v1/sources?name=edge"} {
		synctest.Test(t, func(t *testing.T) {
			v := newEnv(t, Config{}, engine.Config{})
			w := v.do("GET", target)
			if w.Code != 400 || !strings.Contains(w.Body.String(), "the route takes none") {
				t.Fatalf("GET %s: %d %q, want 400", target, w.Code, w.Body)
			}
			path, _, _ := strings.Cut(target, "?")
			if w := v.do("GET", path); w.Code != 200 {
				t.Fatalf("GET %s: %d", path, w.Code)
			}
		})
	}
}

// TestNotProbedHere: a contact this node does not probe (another node is
// its vantage) is marked not_probed_here in the API, NonQualified, with
// the cluster's status and votes beside it, and "(not probed here)" on
// the AoR page; the contact probed here carries no mark.
func TestNotProbedHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := threeNodes()
		v := scenarioEnv(t, f.config(Config{}))
		v.e.SetProbed(func(_, uri string) bool { return uri != gw2URI }, nil)
		body := v.do("GET", "/api/v1/aors/carrier").Body.String()
		for _, want := range []string{
			`"uri":"sip:gw2@198.51.100.2","status":"NonQualified"`,
			`"cluster_status":"Unreachable","votes":[{"node":"a","status":"Unreachable"},{"node":"b","status":"Unreachable"}],"not_probed_here":true}`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("AoR without %s:\n%s", want, body)
			}
		}
		if n := strings.Count(body, "not_probed_here"); n != 1 {
			t.Errorf("not_probed_here %d times, want once (gw3 is probed here):\n%s", n, body)
		}
		aor := v.do("GET", "/aors/carrier").Body.String()
		if want := `NonQualified <span title="another node is a vantage of this contact: this node does not probe it; the cluster column is the verdict">(not probed here)</span>`; !strings.Contains(aor, want) ||
			strings.Count(aor, "(not probed here)") != 1 {
			t.Errorf("AoR page without %s once:\n%s", want, aor)
		}
	})
}
