package main

import (
	"fmt"
	"io"
	"os"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// serviceManager returns the daemon's Notify and Watchdog for the service
// manager that started it, as systemd tells a Type=notify service
// (NOTIFY_SOCKET, WATCHDOG_USEC): nil and 0 when there is none. A message
// that cannot be sent is an error, which the daemon logs once.
func serviceManager(stderr io.Writer) (func(string) error, time.Duration) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return nil, 0
	}
	watchdog, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		fmt.Fprintln(stderr, "qualifyd run: watchdog:", err)
	}
	return func(state string) error {
		_, err := sd.SdNotify(false, state)
		return err
	}, watchdog
}
