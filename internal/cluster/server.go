package cluster

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds the embedded server's start.
const readyTimeout = 10 * time.Second

// serverOptions are the embedded server's options: JetStream in Store,
// named after the node, listening for routes on the node's route address
// and routing to every other node's; no signal handlers, no log of its
// own. The node's own client connects in-process; the server still needs
// a client listener (it starts its routes once that is up), so it listens
// on a random loopback port and requires token, a secret nobody else
// learns. With tls_cert the routes use mutual TLS (routeTLS), with
// secret_file they authenticate with the secret.
func serverOptions(c *Config, token string, tc *tls.Config, secret string) (*server.Options, error) {
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
		Cluster:       server.ClusterOpts{Name: c.Name, Host: host, Port: port},
		// A route that cannot be dialled is logged at the first attempt,
		// then once a minute (one attempt a second), not at every one.
		ConnectErrorReports:   routeErrorReports,
		ReconnectErrorReports: routeErrorReports,
	}
	if tc != nil {
		o.Cluster.TLSConfig, o.Cluster.TLSTimeout = tc, routeTLSTimeout.Seconds()
	}
	var user *url.Userinfo
	if secret != "" {
		o.Cluster.Username, o.Cluster.Password = routeUser, secret
		user = url.UserPassword(routeUser, secret)
	}
	for _, n := range c.Nodes {
		if n.Name != c.Self {
			o.Routes = append(o.Routes, &url.URL{Scheme: "nats-route", User: user, Host: n.Route})
		}
	}
	return o, nil
}

// routeErrorReports is every how many failed attempts to dial a route
// the server logs one.
const routeErrorReports = 60

// routeUser is the user name of the routes' credentials; secret_file
// holds the password.
const routeUser = "qualifyd"

// routeTLSTimeout bounds a route's TLS handshake, with room for a loaded
// host.
const routeTLSTimeout = 5 * time.Second

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
// elected a meta leader, which Run waits for. The server's errors go
// to logf.
func startServer(c *Config, token string, tc *tls.Config, secret string, logf func(string)) (*server.Server, error) {
	o, err := serverOptions(c, token, tc, secret)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: %w", c.Self, err)
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %q: embedded NATS: %w", c.Self, err)
	}
	if logf != nil {
		s.SetLoggerV2(serverLog{logf}, false, false, false)
	}
	s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		return nil, fmt.Errorf("cluster: node %q: embedded NATS not ready on route address %s within %v", c.Self, o.Cluster.Host+":"+strconv.Itoa(o.Cluster.Port), readyTimeout)
	}
	return s, nil
}
