package cluster

// Stats are this node's counters of its part in the cluster, for the
// metrics; plain values, read at once.
type Stats struct {
	// Stale counts the times every watch was started again because the
	// members watch had stopped delivering this node's own renewals.
	Stale uint64
	// Lagged counts the watches started again because they lagged behind
	// their bucket's stream.
	Lagged uint64
	// Pending counts this node's votes and, while it leads, the cluster's
	// verdicts that NATS has not taken yet: queued, or being written. It
	// grows while NATS is away; a contact whose newer status waits behind
	// the one being written counts twice until that write ends.
	Pending int
	// Probes is how many contacts this node probes, as SetProbes last set
	// it.
	Probes int
	// HandedOn counts the leaderships of the buckets' streams this node's
	// embedded server handed on to another node's server at the lease's
	// renewals (lease_stream.go); always 0 with an external NATS.
	HandedOn uint64
	// Foreign counts the nodes not in nodes= seen (View.Foreign).
	Foreign int
}

// Stats returns this node's counters now.
func (c *Cluster) Stats() Stats {
	c.mu.Lock()
	probes := c.probes
	c.mu.Unlock()
	return Stats{Stale: c.rewatches.Load(), Lagged: c.lagged.Load(),
		Pending: c.l.pending(), Probes: probes, HandedOn: c.stepDowns.Load(), Foreign: c.l.foreignCount()}
}
