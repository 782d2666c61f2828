// Package asterisk renders engine events as the text Asterisk prints, so
// operators' log watchers and habits keep working: the contact status lines
// of res_pjsip (pjsip_options.c), its endpoint lines (pjsip_configuration.c,
// ast_sip_persistent_endpoint_update_state), and qualifyd's own lines for
// failures that do not change a status, in the same voice. The texts are
// qualify-semantics §10 (docs/qualify-semantics.md); which endpoint line is
// due, and when, is the endpoint package's and the daemon's business.
//
// It imports engine and qualify only.
package asterisk
