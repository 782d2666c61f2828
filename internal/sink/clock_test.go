package sink

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// steppedClock is a Clock whose Mono is the bubble's time and whose
// Wall is that plus a step the test moves, as chrony moves a clock at
// boot or a VM's clock jumps on resume.
type steppedClock struct {
	mu   sync.Mutex
	step time.Duration
}

func (c *steppedClock) clock() Clock { return Clock{Wall: c.wall, Mono: time.Now} }

func (c *steppedClock) wall() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.step)
}

// stepBy steps the wall clock by d.
func (c *steppedClock) stepBy(d time.Duration) {
	c.mu.Lock()
	c.step += d
	c.mu.Unlock()
}

// TestWaitSurvivesAClockStep: the lower mark's wait is a span: the wall
// clock stepped back an hour while seven downs wait still pushes them
// when the wait (60 s) is over, not an hour later.
func TestWaitSurvivesAClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c steppedClock
		g, src, f := clockedTrunks(t, 30, pjsip.Panic{}, c.clock())
		fail(g, src, 0, 3)
		fail(g, src, 3, 10)
		synctest.Wait()
		if got, want := devices(f, 30), "UUU"+strings.Repeat(".", 27); got != want || !g.Panic().Waiting {
			t.Fatalf("devices %s, panic %+v: want 3 down at once, 7 waiting", got, g.Panic())
		}
		c.stepBy(-time.Hour)
		time.Sleep(time.Minute + awaitEvery)
		synctest.Wait()
		if got, want := devices(f, 30), strings.Repeat("U", 10)+strings.Repeat(".", 20); got != want {
			t.Fatalf("devices %s a wait after the wall clock stepped back an hour: want the seven pushed down", got)
		}
	})
}

// TestFreshSurvivesAClockStep: after a panic, a held down goes down on
// a probe made after the end, whose time the engine reads on the wall
// clock: stepped back an hour after the end, that probe's time is an
// hour before the end's reading, and still counts as after it.
func TestFreshSurvivesAClockStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c steppedClock
		g, src, f := clockedTrunks(t, 10, pjsip.Panic{}, c.clock())
		for i := range 6 {
			src.suspect(fmt.Sprintf("trunk%d", i))
			g.AoRChanged(fmt.Sprintf("trunk%d", i))
		}
		setTrunk(g, src, 0, qualify.Unreachable)
		for i := 1; i < 6; i++ {
			setTrunk(g, src, i, qualify.Reachable)
		}
		synctest.Wait()
		if got := devices(f, 10); got != ".........." || g.Panic().Active {
			t.Fatalf("devices %s, panic %+v: want trunk0 held, the panic over", got, g.Panic())
		}
		c.stepBy(-time.Hour)
		time.Sleep(time.Minute)
		probe := c.wall() // a probe made a minute after the end, down again
		src.set("trunk0", qualify.Unreachable)
		src.mu.Lock()
		src.aors["trunk0"][0].Last.At = probe
		src.mu.Unlock()
		time.Sleep(awaitEvery)
		synctest.Wait()
		if got := devices(f, 10); got != "U........." {
			t.Fatalf("devices %s: want trunk0 pushed down on the probe made after the end, the wall clock stepped back an hour", got)
		}
	})
}
