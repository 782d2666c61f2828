package cluster

import (
	"encoding/base64"
	"strings"
)

// Bucket names.
const (
	bucketMembers  = "qualifyd_members"
	bucketLease    = "qualifyd_lease"
	bucketVotes    = "qualifyd_votes"
	bucketVerdicts = "qualifyd_verdicts"
	leaseKey       = "leader"
)

// A key of the buckets is letters, digits and "-/_=.", neither empty nor
// starting or ending with '.'; a contact key (AoR/URI) is anything, so it
// is stored as 'c' and its unpadded base64url (letters, digits, '-' and
// '_'), whose alphabet has no '.', the separator of the node's name in a
// vote's key. The 'c' keeps the empty contact a valid key.

// The subject of a bucket's key and the header that marks a removal, as
// JetStream's key-value store defines them (ADR-8): a key's message goes
// to $KV.BUCKET.KEY, and a delete is a message with "KV-Operation: DEL"
// and no data.
const (
	kvOperation = "KV-Operation"
	kvDelete    = "DEL"
)

// kvSubject is the subject of key in bucket.
func kvSubject(bucket, key string) string { return "$KV." + bucket + "." + key }

// contactKey encodes a contact's key for a bucket.
func contactKey(contact string) string {
	return "c" + base64.RawURLEncoding.EncodeToString([]byte(contact))
}

// voteKey is the key of node's vote on contact: CONTACT.NODE.
func voteKey(contact, node string) string { return contactKey(contact) + "." + node }

// parseVoteKey is voteKey's inverse; ok is false for a key of another
// shape, which the watcher ignores.
func parseVoteKey(key string) (contact, node string, ok bool) {
	enc, node, ok := strings.Cut(key, ".")
	if !ok || checkName(node) != nil {
		return "", "", false
	}
	c, ok := parseContactKey(enc)
	return c, node, ok
}

// parseContactKey is contactKey's inverse.
func parseContactKey(enc string) (string, bool) {
	enc, ok := strings.CutPrefix(enc, "c")
	if !ok {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	return string(b), err == nil
}
