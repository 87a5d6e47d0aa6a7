// Package evict performs the drain decisions of remediator/drain through
// the API server: the thin acting layer behind drain.Runner. Evictor and
// Run post the Eviction subresource (which honours PodDisruptionBudgets) or
// delete pods, and report a budget's refusal as an expected outcome rather
// than an error. Their client should come from EvictionConfig (NewEvictor
// does that): otherwise client-go sleeps inside one eviction call for up to
// 100 s on the Retry-After of a budget whose status is behind its spec.
//
// What must hold:
//
//   - It decides nothing: which pods to evict, delete or leave alone is
//     drain.Plan's answer, and Run acts on exactly the pods of the Decision
//     it is given.
//   - A pod is evicted or deleted only while it still has the UID it had when
//     the decision was made, so a pod recreated under the same name (a
//     StatefulSet pod, possibly on another node) is never touched.
//   - A PodDisruptionBudget is bypassed only by a deletion the Decision asks
//     for; an eviction the budget refuses is reported blocked, never turned
//     into a deletion.
//   - It keeps no state between calls, and remediator/drain and
//     remediator/plan never import it: only the controller's wiring does.
package evict
