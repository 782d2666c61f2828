package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// serviceManager returns the daemon's Notify and Watchdog for the service
// manager that started it, as systemd tells a Type=notify service
// (NOTIFY_SOCKET, WATCHDOG_USEC): nil and 0 when there is none. A message
// that cannot be sent is reported once on stderr.
func serviceManager(stderr io.Writer) (func(string), time.Duration) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil, 0
	}
	watchdog, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd run: watchdog:", err)
	}
	var once sync.Once
	return func(state string) {
		if _, err := sd.SdNotify(false, state); err != nil {
			once.Do(func() { fmt.Fprintln(stderr, "qualifyd run: telling the service manager:", err) })
		}
	}, watchdog
}
