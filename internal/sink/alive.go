package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// aliver is a driver with a cheap probe of its router: it answers
// without a login, a list read or a change, so that the reconciler can
// run it every few seconds while it backs off.
type aliver interface {
	// alive returns nil when the router answers.
	alive(ctx context.Context) error
}

// aliveEvery is how often a backing-off reconciler probes its router,
// and the bound of each probe: a router that answers again is in step
// within about two of them.
const aliveEvery = 2 * time.Second

// alive reads the Manager's banner on a connection of its own, closed at
// once: no login, so nothing in Asterisk's log.
func (a *AMI) alive(ctx context.Context) error {
	conn, err := a.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		_ = conn.SetReadDeadline(d)
	}
	banner, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(banner, "Asterisk Call Manager/") {
		return fmt.Errorf("not an Asterisk Manager: banner %q", clip(banner))
	}
	return nil
}

// alive calls core.version, which every Kamailio serves; any JSON-RPC
// answer, an error object included, is alive.
func (k *Kamailio) alive(ctx context.Context) error {
	var version string
	err := k.call(ctx, "core.version", nil, &version)
	if rej := (*Rejected)(nil); errors.As(err, &rej) {
		return nil
	}
	return err
}
