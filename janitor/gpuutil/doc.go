// Package gpuutil reads how busy each pod's GPUs were over a window from
// dcgm-exporter's metrics in Prometheus, for the janitor's idle check.
//
// A pod is idle only when every GPU it holds stayed below a threshold for the
// whole window. This package supplies the evidence for that decision — per
// pod, per GPU (a UUID, or UUID/GPU_I_ID for a MIG instance), the highest
// utilisation in percent — and nothing else: the threshold and the verdict
// belong to the janitor.
//
// # What it must never do
//
//   - Never turn a missing, failed or doubtful series into idle. A GPU is put
//     in Result.Pods only when its series was fresh, began at the window's
//     start, held its sample rate over the window and had no NaN sample;
//     otherwise it is counted in Result.Dropped, and a failed query (Prometheus
//     down, timeout, an answer that is not a vector) sets Result.Err. A GPU
//     that is in neither map had no usable samples at all. The caller treats
//     all three as Unknown, never as idle.
//   - Never query per pod. One instant query answers one (metric, window) pair
//     for every pod in the cluster at once; 50,000 GPU pods cost one request
//     per distinct pair per janitor cycle, and the answer holds one small
//     series (namespace, pod, UUID, GPU_I_ID and a value) per GPU.
//
// # The query
//
// Expr builds it. With W the window, S the staleness limit, T = W/10 and
// k = (namespace, pod, UUID, GPU_I_ID), each term aggregated `by (k)` so that
// the container, Hostname, instance and other labels fall away:
//
//	(
//	    max by (k) (max_over_time(M[W]))        the answer: highest value
//	  + 0 * sum by (k) (sum_over_time(M[W]))    NaN when any sample is NaN
//	)
//	and (
//	    sum by (k) (count_over_time(M[W]))                      samples in the window
//	  >= 8 * (sum by (k) (count_over_time(M[T])) - 1)           ≥ 80% of the last tenth's rate
//	  >= 8 * (sum by (k) (count_over_time(M[T] offset W-T)) - 1) and of the first tenth's
//	)
//	and sum by (k) (count_over_time(M[S]))                      fresh: a sample within S of now
//	and sum by (k) (count_over_time(M[S] offset W-S))           began: a sample within S of the start
//	or -1 * group by (k) (count_over_time(M[T]))                 seen lately but failed a check
//	or -1 * group by (k) (count_over_time(M[T] offset W-T))      seen at the start but failed a check
//
// Why this shape:
//
//   - Aggregating by k before the checks, with sum for counts, makes a GPU
//     whose series was split in two (dcgm-exporter restarted and came back
//     with another instance or Hostname label) one continuous record, so a
//     DaemonSet rollout does not make every pod Unknown for a whole window.
//     The counts of the halves add up; the maximum is the maximum of both.
//   - max_over_time skips NaN samples (it returns NaN only when all are NaN),
//     sum_over_time does not: adding 0 × the sum turns the answer into NaN
//     exactly when some sample in the window was NaN. Staleness markers —
//     the NaNs Prometheus writes when a series disappears or its scrape fails —
//     are not samples of a range and do not count. Both facts were checked
//     against a real Prometheus by this package's integration test.
//   - The gap check compares the number of samples in the window with the
//     rate seen in its last and first tenths. It needs no knowledge of the
//     scrape interval, survives a change of the interval (a faster rate lately
//     makes the GPU Unknown, never idle), and catches an exporter that flapped
//     for a fifth of the window or more. The "- 1" absorbs the one sample of
//     scrape jitter a range boundary can add; windows should span about fifty
//     scrapes or more for the check to have bite (4h at 30s is 480).
//   - Freshness and the start are checked with S, the same tolerance the
//     caller already grants for "the latest sample is recent".
//   - Invalid GPUs come back with the value -1 (from the "or" branches, which
//     add only label sets the valid branch lacks), so one answer tells the
//     caller both the evidence and what was doubted, without an extra label
//     on every series. A GPU seen only in the middle of the window (started
//     late and stopped early) is in neither map.
//   - Everything is one instant query: the engine reads each series about
//     three times over the window (max, sum, count) plus the tenths, holds one
//     series' samples at a time, and no subquery materialises a per-step
//     matrix (a subquery at one-minute steps over 4h for 400,000 GPUs would
//     hold 96 million points and exceed Prometheus' default query.max-samples).
//
// # Long windows: the recorded evidence
//
// A window of MinBucketWindow or more is read from the recording rules of
// group BucketGroup (deploy/prometheus/prometheusrule.yaml), unless
// Options.RawSeries. E is kubemedic:<m>:evidence_5m, per GPU and 5-minute
// bucket its maximum in percent, or NotEvidence when the rules found the
// bucket doubtful (a NaN, fewer than 80 % of the samples of the bucket
// before it, or none before it); T is BucketTail; G is the group's
// bucket_end_5m:
//
//	max by (k) (                                        the answer: the larger of
//	    label_replace(max by (k) (max_over_time(E[W])), ...)    the buckets' maximum
//	  or label_replace(max by (k) (max_over_time(M[T])), ...)   and the raw tail's
//	)
//	+ 0 * sum by (k) (sum_over_time(M[T]))              NaN when the tail holds one
//	and max by (k) (last_over_time(E[T]))               a bucket recorded lately
//	and sum by (k) (count_over_time(M[S]))              fresh
//	or -1 * group by (k) (last_over_time(E[T]))         seen lately but failed a check
//	or label_replace(count_over_time(G[W]), ...)        how many buckets the group made,
//	or label_replace(min_over_time(G[W]), ...)          the oldest
//	or label_replace(max_over_time(G[W]), ...)          and the newest
//
// Only E is read over the window: a selector costs about the same for
// every series it visits in every block the window spans, whatever the
// samples, so the rules judge each bucket and the query reads one series.
// A maximum of NotEvidence or more is a doubtful bucket in the window; the
// group's three numbers make every pod Unknown (Result.Err) when the group
// is not installed, lags more than T, began inside the window or skipped
// an evaluation (fewer ends than the span from the oldest to the newest
// holds). Reach is how old a pod must be for all of it to lie after its
// start.
//
// The decoder in Go then applies the last rules: a NaN, infinite or negative
// value (and, for the evidence, one of NotEvidence or more) is dropped,
// GR_ENGINE_ACTIVE (a ratio) is converted to percent in the raw query, and a
// series without a UUID is dropped because it cannot be told apart from the
// pod's other GPUs.
package gpuutil
