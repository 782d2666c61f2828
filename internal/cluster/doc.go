// Package cluster is membership, assignment, vantage quorum and the sink
// lease of several qualifyd nodes, on NATS JetStream.
//
// Nothing here is a protocol of our own: the nodes meet in replicated
// JetStream key-value buckets (an embedded nats-server per node, clustered
// over routes, or an external NATS) and use what the buckets give: a TTL
// that removes a key nobody renews, create-if-absent, compare-and-set on a
// key's revision, and watches.
//
// Four buckets, each with min(3, nodes) replicas:
//
//   - qualifyd_members: one key per node, its name, renewed every MemberTTL/3;
//     a node that stops renewing leaves when the bucket's TTL removes its key.
//   - qualifyd_lease: the key "leader", created if absent by a candidate,
//     renewed by its holder with compare-and-set on the revision, removed by
//     the TTL when the holder stops renewing (lease.go); the holder leads by
//     the bucket's real TTL and sets it to its file's lease_ttl.
//   - qualifyd_votes: each vantage's status of each contact it probes, under
//     key cCONTACT.NODE (CONTACT in unpadded base64url, keys.go), with the
//     voter's run and, while its peer drains, "draining" ("Reachable RUN
//     draining"): one live vantage's drain holds a Reachable contact out.
//   - qualifyd_verdicts: the cluster's status of each contact, written by the
//     leader, read back by a node that restarts, and deleted by the leader
//     once no vote holds the contact and its configuration no longer has it
//     (forget.go).
//
// The pure parts take no lock, goroutine or I/O and are table-tested:
// [Config.Set] and [Config.Finish] (the [cluster] section), [Assign]
// (rendezvous hashing of a contact over the live nodes), [Quorum.Decide]
// (the vantage quorum rule), the tally that applies it per contact, the
// ledger that holds every decision's state behind one lock (ledger.go:
// a vote, a record, a membership change or a leading edge in, the
// verdicts and the writes to make out; no membership, vote or record
// goes back to an older revision than one applied, which a watch on a
// replica still catching up delivers, but a removed vote, which keeps
// none: newerLocked), and the lease's deadline arithmetic.
//
// A [Cluster] runs them: [New] starts the embedded server (or nothing, with
// nats_url) and [Cluster.Run] announces the node, campaigns for the lease,
// publishes this node's votes and watches everyone's, until its context
// ends. What the daemon reads: [Cluster.View] (members, leader, whether
// this node is in the cluster), [Cluster.Leading] (whether this node may push
// the sinks now) and the [Hooks]
// it is given (leadership and cluster-status edges, and whether the
// node's configuration has a contact).
//
// One publisher writes this node's votes and, while it leads, the
// verdicts: in batches of the latest status of each contact since the
// last batch, pipelined (up to publishWindow sent before their
// acknowledgements are awaited), so that a burst of status changes costs
// a few round trips through the replicas, not one per contact.
//
// Who may join (secure.go, files.go, routetls.go): the embedded server's
// routes use mutual TLS (each peer's certificate checked against tls_ca
// and its subjectAltName DNS name against nodes=), the shared secret of
// secret_file as their credentials, and the cluster's name; routes off
// loopback in clear are refused unless insecure_routes=yes, and so is a
// password or token to an external NATS off loopback in clear unless
// insecure_nats=yes. The files are
// read by [Config.CheckFiles], at start and again at [Cluster.Reload],
// and the TLS callbacks take the latest.
//
// A node that loses NATS keeps running on its own view: its View says it is
// not in the cluster, it is not leader, and its votes wait, coalesced per
// contact, until NATS is back.
//
// Imports: qualify (the Status type), pjsip (ParseBool, the file's boolean
// words), the NATS server and client.
package cluster
