// Package simulate measures the failure-detection quality of qualify
// policies: it runs the real engine and scheduler, the daemon's
// code, in virtual time against a simulated peer, and derives the closed
// forms the simulation is tested against.
//
// # How it runs
//
// Each AoR gets its own engine.Engine with one contact, stepped by an
// engine.Driver: a discrete-event loop takes the earliest of "a probe is
// due" and "a probe in flight ends". A due probe starts the one way the
// daemon's does, through the engine's Prober, which is the simulator: its
// Start asks the peer for the outcome and queues the probe's end. At the
// end the loop sets the clock there and calls the engine's done, which
// applies the result through the engine's own bookkeeping (Observe,
// counters, events, availability). No goroutine,
// timer or wall clock is involved, so thousands of simulated days take
// seconds, and a run depends only on its inputs and Config.Seed. Two
// experiments run per AoR, in parallel:
//
//   - healthy: Config.Days of a live peer behind a lossy path. False
//     outages are the contact becoming Unreachable; unavailable time is
//     the time the AoR had no routable contact (never, in latency-only
//     mode).
//   - deaths: after Config.WarmUp of healthy history (what
//     qualify_failures=auto learns from, carried through every trial),
//     Config.Trials times, the peer dies at a moment uniform over one
//     probe period F, at least F after its contact became Reachable, and
//     stays dead for Config.DeadSpell (or until detected); detection is
//     the time from the death to the contact becoming Unreachable. The
//     peer then revives and the contact recovers before the next one.
//
// # The peer and its path
//
// The peer answers at once whatever reaches it while alive; the path adds
// a round-trip time (DefaultRTT) and loses things:
//
//   - probe loss p: each probe fails as a whole, independently;
//   - packet loss P: each packet in each direction is lost independently.
//     A probe's request is sent at the offsets of Timer E (RFC 3261
//     17.1.2.2: 0, 0.5, 1.5, 3.5, 7.5, 11.5 s ..., T1 = 0.5 s doubling up to
//     T2 = 4 s) while its answer could still beat the deadline T; the probe
//     succeeds if some copy and its response both survive, and its RTT runs
//     from the first send to that answer. With n such copies the probe
//     fails with probability (1 - (1-P)^2)^n: n = 3 for T = 3 s, so 5%
//     packet loss fails one probe in about a thousand;
//   - bursts (--burst B): the loss is driven by a continuous-time
//     Gilbert-Elliott channel instead of coin flips. In the bad state
//     everything is lost, in the good state nothing. The sojourns are
//     exponential with means B (bad) and G = B(1-P)/P (good), that is
//     transition rates 1/B out of bad and P/((1-P)B) out of good, so the
//     stationary share of bad time, the loss probability of a probe or
//     packet sent at a random moment, is B/(B+G) = P. Two sends d apart
//     are both lost with probability P(P + (1-P) exp(-d(1/B + 1/G))): a
//     retry 2 s after a loss inside a 10 s burst is usually lost too.
//
// # Closed forms (independent probe loss p < 1, q = 1 - p, M = 1)
//
// Let F, T, N, R, D be the policy's qualify_frequency, qualify_timeout,
// qualify_failures, qualify_retry_interval and effective down interval.
// With a failure window W, N below stands for K = max(N, 1 + ceil(W/S_R)),
// the failure whose end is W after the first one's (every simulated
// failure is a timeout, so failures end S_R apart); with
// qualify_failures=auto the forms hold for each fixed N it may take, and
// the worst detection takes qualify_failures_max. With M > 1 the outage
// is one outcome of expected length (the chain of recovery in closed.go):
// the means stay exact, the variances leave out the recovery's spread.
// After a failed probe the next one is sent, counting from the failed
// one's send,
//
//	S_R = T + R while suspect, or F (send to send) when R is unset,
//	S_D = T + D while Unreachable, or F when neither D nor R is set,
//
// never before the deadline (max with T), and a probe that succeeds while
// healthy is followed by the next one F later. Cut time at the probes sent
// while healthy: the cycles between them are independent and identically
// distributed (a renewal process). A cycle is
//
//   - k < N failures and a success, with probability p^k q and length
//     k S_R + F, k+1 probes; or
//   - N failures, a false outage, then g >= 1 probes while Unreachable of
//     which the last succeeds: probability p^N p^(g-1) q, length
//     (N-1) S_R + g S_D + F, N+g probes, Unreachable for g S_D - T + RTT
//     (from the N-th failure's deadline to the successful answer).
//
// By the renewal-reward theorem the long-run rates are a cycle's expected
// reward over its expected length E[L]:
//
//	false outages per day = 86400 p^N / E[L]
//	E[L] = sum_{k<N} p^k q (k S_R + F) + p^N ((N-1) S_R + S_D/q + F)
//	mean false outage = S_D/q - T + RTT
//	unavailable fraction = p^N (S_D/q - T + RTT) / E[L]
//	probes per hour = 3600 (sum_{k<N} p^k q (k+1) + p^N (N + 1/q)) / E[L]
//
// As E[L] = F(1 + O(p)), the outage rate is about 86400/F p^N. For
// Asterisk's policy (N = 1, R and D unset, so S_R = S_D = F) the sums
// collapse to E[L] = F/q: exactly 86400/F p(1-p) false outages a day, each
// lasting F/q - T + RTT on average. The count in a run of t seconds has
// variance t E[(Y - rL)^2]/E[L] (Y the cycle's reward, r its rate), which
// Predict returns and the tests use as their tolerance.
//
// Detection: if the peer dies just after a probe was sent and answered, the
// next probe goes out F later and the N failures end at
//
//	worst detection = F + T + (N-1) S_R  (F + T + (N-1)(R+T) with R set)
//
// and at T + (N-1) S_R after the first failed send. Losses before the
// death only shorten it (the contact may already be suspect), so the
// simulator's worst over many trials approaches the bound from below and
// never exceeds it. For a death at a uniform moment of a lossless run the
// mean is F/2 + T + (N-1) S_R. With the contract's reference policy (F 30,
// T 3, N 3, R 2) that is 43 s worst, 28 s mean, 13 s from the first loss.
package simulate
