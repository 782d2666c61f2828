package cluster

import (
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
	for _, contact := range c.l.ownVotes() {
		if !c.configured(contact) {
			c.Report(contact, qualify.Removed)
		}
	}
}

// dropOrphans queues, when this node leads, the removal of the verdict of
// each of contacts that no vote holds and that this node's configuration
// does not have.
func (c *Cluster) dropOrphans(contacts []string) {
	if len(contacts) == 0 || !c.Leading() {
		return
	}
	var gone []string
	for _, contact := range c.l.unheld(contacts) { // the hook only for those no vote holds
		if !c.configured(contact) {
			gone = append(gone, contact)
		}
	}
	if len(gone) > 0 && c.l.drop(gone) {
		c.poke()
	}
}

// forget drops the cluster's status of contact once neither a vote nor
// a record holds it: at the record's removal (gone: the record goes
// first), or at the removal of the last vote when the record went
// before it (the votes and the verdicts come through two watches, in
// either order). rev is the KV revision of the record's removal (gone).
// The Verdict hook hears the change; nothing is recorded for it.
func (c *Cluster) forget(contact string, gone bool, rev uint64) {
	c.verdictMu.Lock()
	defer c.verdictMu.Unlock()
	if v, changed := c.l.forget(contact, gone, rev); changed && c.hooks.Verdict != nil {
		c.hooks.Verdict(v)
	}
}
