// Package asterisk renders engine events as the text Asterisk prints, so
// operators' log watchers and habits keep working: the contact status lines
// of res_pjsip (pjsip_options.c), and qualifyd's own lines for failures that
// do not change a status, in the same voice.
package asterisk
