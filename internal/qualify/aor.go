package qualify

// AoR is one address of record to qualify: its static contacts and the
// options they are probed with. The configuration reader (pjsip) builds
// it and the engine applies it; defining it here, in the package both
// import, lets the reader hand the engine its own AoRs instead of a copy
// (issue 7: the copy was a fifth of a million-contact load's peak RSS).
type AoR struct {
	// Name is the AoR's name, unique among the AoRs applied together.
	Name string
	// Contacts are the static contact URIs, in order, unique within the
	// AoR.
	Contacts []string
	// Policy holds the AoR's qualify options; nil means the zero Policy
	// (qualify off). Like Probe, the configuration reader shares one
	// Policy between the AoRs that have the same: never modify it through
	// an AoR.
	Policy *Policy
	// Probe shapes the OPTIONS request; nil means none of its options.
	// The configuration reader shares one ProbeOptions between the AoRs
	// that have the same (issue 7: inline, it was 112 of a million-AoR
	// configuration's 232 bytes per AoR): never modify it through an AoR.
	Probe *ProbeOptions
}

// PolicyValue returns the policy a.Policy points to, or the zero Policy.
func (a *AoR) PolicyValue() Policy {
	if a.Policy == nil {
		return Policy{}
	}
	return *a.Policy
}

// ProbeOptions returns the options a.Probe points to, or none.
func (a *AoR) ProbeOptions() ProbeOptions {
	if a.Probe == nil {
		return ProbeOptions{}
	}
	return *a.Probe
}
