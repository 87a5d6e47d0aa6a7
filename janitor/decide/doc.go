// Package decide holds every decision of the janitor as pure functions of
// (pod facts, merged policy, GPU evidence, the pod's notice state, now):
// which rule holds (Judge), what the GPU metrics say (IdleFromMetrics),
// what to do next in notice → grace → recheck → act (Next), and whether the
// evidence a reclaim was decided on is too old to act on (EvidenceTooOld),
// and which Warnings told once are new to an object's record (Tell).
// The controller and `kubemedic janitor plan` both call the judging ones,
// so the two cannot drift; EvidenceTooOld only the controller, as the plan
// never acts.
//
// It must never make an API call, read the clock, or turn missing evidence
// into a reason to act: a rule that cannot be judged is Unknown, and an
// Unknown pod is neither noticed nor reclaimed.
package decide
