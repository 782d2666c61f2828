package web

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// TestPageShowsOnePage: the status page shows whole AoRs up to PageLimit
// contacts, or the first AoR's first PageLimit contacts, with the totals.
func TestPageShowsOnePage(t *testing.T) {
	aors := []engine.AoR{
		{Name: "d", Contacts: numbered("d", 1), Policy: new(qualify.DefaultPolicy())},
		{Name: "big", Contacts: numbered("big", 3), Policy: new(qualify.DefaultPolicy())},
		{Name: "c", Contacts: numbered("c", 1), Policy: new(qualify.DefaultPolicy())},
	}
	tests := []struct {
		limit        int
		shown        []string
		hidden       []string
		contacts     int
		omitted      string
		omittedShown bool
	}{
		{2, []string{"big", "big-0", "big-1"}, []string{"big-2", ">c ", ">d "}, 2, "3 more contacts not shown", true},
		{4, []string{"big", "big-2", ">c "}, []string{">d "}, 4, "1 more contacts not shown", true},
		{5, []string{"big", ">c ", ">d "}, nil, 5, "", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				v := newEnv(t, Config{PageLimit: tt.limit}, engine.Config{}, aors...)
				body := v.do("GET", "/").Body.String()
				for _, s := range tt.shown {
					if !strings.Contains(body, s) {
						t.Errorf("page without %q", s)
					}
				}
				for _, s := range tt.hidden {
					if strings.Contains(body, s) {
						t.Errorf("page with %q", s)
					}
				}
				if !strings.Contains(body, "3 AoRs, 5 contacts") || strings.Contains(body, "more contacts not shown") != tt.omittedShown ||
					tt.omittedShown && !strings.Contains(body, tt.omitted) {
					t.Errorf("totals or omitted line wrong:\n%s", body)
				}
			})
		})
	}
}
