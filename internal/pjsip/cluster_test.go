package pjsip

import (
	"errors"
	"reflect"
	"testing"
)

func TestClusterSectionKeptRaw(t *testing.T) {
	src := "[t]\ntype=aor\ncontact=sip:192.0.2.1\n[c]\ntype=cluster\nnodes=a@127.0.0.1:6222\nquorum=all\n"
	conf, err := Parse("pjsip.conf", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := &Cluster{Name: "c", File: "pjsip.conf", Line: 4, Options: []ClusterOption{
		{"nodes", "a@127.0.0.1:6222", "pjsip.conf", 6}, {"quorum", "all", "pjsip.conf", 7}}}
	if !reflect.DeepEqual(conf.Cluster, want) {
		t.Fatalf("Cluster = %+v, want %+v", conf.Cluster, want)
	}
	if conf, err := Parse("pjsip.conf", []byte("[t]\ntype=aor\ncontact=sip:192.0.2.1\n"), Options{}); err != nil || conf.Cluster != nil {
		t.Fatalf("a file without a cluster section: %+v, %v", conf, err)
	}
}

func TestClusterSectionTwice(t *testing.T) {
	for name, src := range map[string]string{
		"two names": "[c]\ntype=cluster\nnodes=a\n[d]\ntype=cluster\nnodes=b\n",
		"one name":  "[c]\ntype=cluster\nnodes=a\n[c]\ntype=cluster\nnodes=b\n",
	} {
		_, err := Parse("pjsip.conf", []byte(src), Options{})
		want := map[string]string{
			"two names": `pjsip.conf:4: section "d": duplicate section: a second cluster section (the first, "c", is at pjsip.conf:1): a file has at most one`,
			"one name":  `pjsip.conf:4: section "c": duplicate section: a second cluster named "c" (the first is at pjsip.conf:1)`,
		}[name]
		if err == nil || err.Error() != want || !errors.Is(err, ErrDuplicate) {
			t.Errorf("%s: %v, want %s", name, err, want)
		}
	}
}

func TestClusterOptionError(t *testing.T) {
	unknown := errors.New("unknown option")
	c := &Cluster{Name: "c", File: "q.conf", Line: 3}
	o := ClusterOption{Key: "quorum", Value: "most", File: "q.conf", Line: 5}
	err := c.OptionError(o, errors.New(`invalid value: "most": want majority, all or any`), unknown)
	if want := `q.conf:5: section "c": option "quorum": invalid value: "most": want majority, all or any`; err.Error() != want || !errors.Is(err, ErrValue) {
		t.Errorf("option error %v, want %s", err, want)
	}
	err = c.OptionError(o, fmtWrap(unknown, "a cluster section has nodes"), unknown)
	if want := `q.conf:5: section "c": option "quorum": unknown option: a cluster section has nodes`; err.Error() != want || !errors.Is(err, ErrUnknownOption) {
		t.Errorf("unknown option error %v, want %s", err, want)
	}
	err = c.SectionError(errors.New("invalid value: nodes= is required"), unknown)
	if want := `q.conf:3: section "c": invalid value: nodes= is required`; err.Error() != want {
		t.Errorf("section error %v, want %s", err, want)
	}
}

// fmtWrap wraps sentinel as the cluster package does: "sentinel: detail".
func fmtWrap(sentinel error, detail string) error {
	return &wrapped{sentinel, detail}
}

type wrapped struct {
	s error
	d string
}

func (w *wrapped) Error() string { return w.s.Error() + ": " + w.d }
func (w *wrapped) Unwrap() error { return w.s }
