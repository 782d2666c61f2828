package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// The service manager's view of the daemon (systemd's sd_notify
// protocol, through Config.Notify): READY=1 once the saved state is
// restored and the engine and the HTTP front run, a STATUS line with the
// configuration's size at start and after each reload, STOPPING=1 when
// it stops, and WATCHDOG=1 every Config.Watchdog/2 while the engine's
// table can be read, so that a daemon whose engine hangs is restarted.

// notify sends state to the service manager, when there is one; the
// first failure is logged.
func (d *Daemon) notify(state string) {
	if d.cfg.Notify == nil {
		return
	}
	if err := d.cfg.Notify(state); err != nil {
		d.notified.Do(func() { d.log.Notice(slog.LevelError, "telling the service manager: "+err.Error()) })
	}
}

// status is the STATUS line of the running configuration; the caller
// holds reloadMu.
func (d *Daemon) status() string {
	return fmt.Sprintf("STATUS=qualifying %d contacts of %d AoRs", d.running.contacts, d.running.aors)
}

// ready tells the service manager that the daemon is up.
func (d *Daemon) ready() {
	d.reloadMu.Lock()
	status := d.status()
	d.reloadMu.Unlock()
	d.notify("READY=1\n" + status)
}

// feedWatchdog pings the watchdog every Config.Watchdog/2 until ctx is
// done, each time after reading the engine's summary, which needs the
// lock every probe result takes.
func (d *Daemon) feedWatchdog(ctx context.Context) {
	if d.cfg.Watchdog <= 0 || d.cfg.Notify == nil {
		return
	}
	tick := time.NewTicker(d.cfg.Watchdog / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			d.eng.Summary()
			d.notify("WATCHDOG=1")
		}
	}
}
