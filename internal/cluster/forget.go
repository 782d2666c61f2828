package cluster

import (
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// A contact removed from the configuration leaves nothing in the
// buckets. Each node withdraws its own vote: at once when a reload
// removes the contact (the daemon reports Removed), or when it starts
// with a file that no longer has it (withdrawUnconfigured). The leader
// deletes the verdict of a contact once no vote holds it and its own
// configuration does not have it (dropOrphans): while the nodes' files
// differ, a node whose file still has the contact keeps its vote, and
// so the verdict. Every node forgets the contact's status when the
// verdict's removal reaches it (forget).

// configured is Hooks.Configured, true without the hook.
func (c *Cluster) configured(contact string) bool {
	return c.hooks.Configured == nil || c.hooks.Configured(contact)
}

// withdrawUnconfigured withdraws this node's votes, as the votes bucket
// holds them, of the contacts its configuration does not have: votes
// left by a run before a reload this node missed.
func (c *Cluster) withdrawUnconfigured() {
	if c.hooks.Configured == nil {
		return
	}
	c.mu.Lock()
	var own []string
	for contact, votes := range c.tally.votes {
		if _, ok := votes[c.cfg.Self]; ok {
			own = append(own, contact)
		}
	}
	c.mu.Unlock()
	for _, contact := range own {
		if !c.configured(contact) {
			c.Report(contact, qualify.Removed)
		}
	}
}

// orphansLocked lists the contacts with a status that no vote holds;
// c.mu held.
func (c *Cluster) orphansLocked() []string {
	var out []string
	for contact := range c.tally.status {
		if len(c.tally.votes[contact]) == 0 {
			out = append(out, contact)
		}
	}
	return out
}

// dropOrphans queues, when this node leads, the removal of the verdict of
// each of contacts that no vote holds and that this node's configuration
// does not have.
func (c *Cluster) dropOrphans(contacts []string) {
	if len(contacts) == 0 || !c.Leading() {
		return
	}
	var gone []string
	for _, contact := range contacts {
		if !c.configured(contact) {
			gone = append(gone, contact)
		}
	}
	c.mu.Lock()
	queued := false
	if c.leadingAt(time.Now()) {
		for _, contact := range gone {
			_, recorded := c.recorded[contact]
			_, decided := c.tally.status[contact]
			if len(c.tally.votes[contact]) == 0 && (recorded || decided) {
				c.recordsOut[contact] = qualify.Removed
				queued = true
			}
		}
	}
	c.mu.Unlock()
	if queued {
		c.poke()
	}
}

// forget follows the removal of contact's verdict: the record goes and,
// unless a vote came meanwhile, the cluster's status too; the Verdict
// hook hears the change (nothing is recorded for it: the record is gone).
func (c *Cluster) forget(contact string) {
	c.verdictMu.Lock()
	defer c.verdictMu.Unlock()
	c.mu.Lock()
	delete(c.recorded, contact)
	v, changed := c.tally.forget(contact)
	c.mu.Unlock()
	if changed && c.hooks.Verdict != nil {
		c.hooks.Verdict(v)
	}
}
