package cluster

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// clusterName is the NATS cluster name of every embedded server.
const clusterName = "qualifyd"

// readyTimeout bounds the embedded server's start.
const readyTimeout = 10 * time.Second

// serverOptions are the embedded server's options: JetStream in Store,
// named after the node, listening for routes on the node's route address
// and routing to every other node's; no signal handlers, no log of its
// own. The node's own client connects in-process; the server still needs
// a client listener (it starts its routes once that is up), so it listens
// on a random loopback port and requires token, a secret nobody else
// learns.
func serverOptions(c *Config, token string) (*server.Options, error) {
	self := c.Nodes[c.index(c.Self)]
	host, port, err := splitRoute(self.Route)
	if err != nil {
		return nil, err
	}
	o := &server.Options{
		ServerName:    c.Self,
		Host:          "127.0.0.1",
		Port:          server.RANDOM_PORT,
		Authorization: token,
		JetStream:     true,
		StoreDir:      c.Store,
		NoSigs:        true,
		NoLog:         true,
		Cluster:       server.ClusterOpts{Name: clusterName, Host: host, Port: port, Advertise: c.advertise},
	}
	for _, n := range c.Nodes {
		if n.Name != c.Self {
			o.Routes = append(o.Routes, &url.URL{Scheme: "nats-route", Host: n.Route})
		}
	}
	return o, nil
}

// splitRoute splits a checked host:port.
func splitRoute(route string) (string, int, error) {
	host, p, err := net.SplitHostPort(route)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	return host, port, err
}

// startServer starts the node's embedded server and waits until its
// route listener is up; its JetStream becomes usable once the cluster has
// elected a meta leader, which Run waits for.
func startServer(c *Config, token string) (*server.Server, error) {
	o, err := serverOptions(c, token)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: %w", c.Self, err)
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: embedded NATS: %w", c.Self, err)
	}
	s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("cluster: node %q: embedded NATS not ready on route address %s within %v", c.Self, o.Cluster.Host+":"+strconv.Itoa(o.Cluster.Port), readyTimeout)
	}
	return s, nil
}
