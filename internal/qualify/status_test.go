package qualify

import (
	"strings"
	"testing"
)

func TestNumReasons(t *testing.T) {
	// Every reason below NumReasons has a name, and no other has one: a
	// reason added after ReasonDNS, with its name, must move NumReasons.
	if len(reasonLabels) != NumReasons {
		t.Fatalf("NumReasons %d, %d reason names", NumReasons, len(reasonLabels))
	}
	for r := range Reason(NumReasons) {
		if strings.HasPrefix(r.String(), "reason(") {
			t.Errorf("reason %d has no name", r)
		}
	}
}
