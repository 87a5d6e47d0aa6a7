package gpuutil

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// sample is one row of Expr's answer: labels as name/value pairs, then a value.
func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v), Timestamp: 1_700_000_000_000}
}

// gpuRow is a row for a whole GPU of pod ns/pod.
func gpuRow(ns, pod, uuid string, v float64) *model.Sample {
	return sample(v, "namespace", ns, "pod", pod, "UUID", uuid)
}

// migRow is a row for MIG instance gi of GPU uuid.
func migRow(ns, pod, uuid, gi string, v float64) *model.Sample {
	return sample(v, "namespace", ns, "pod", pod, "UUID", uuid, "GPU_I_ID", gi)
}

func TestDecode(t *testing.T) {
	trainer := PodKey{Namespace: "ml", Name: "trainer-0"}
	notebook := PodKey{Namespace: "research", Name: "nb-7"}
	tests := []struct {
		desc        string
		metric      Metric
		vec         model.Vector
		wantPods    map[PodKey][]GPU
		wantDropped map[PodKey]int
		wantErr     string
	}{
		{
			desc:     "an empty answer is no evidence about anyone",
			metric:   MetricGPUUtil,
			vec:      model.Vector{},
			wantPods: map[PodKey][]GPU{},
		},
		{
			desc:   "whole GPUs keep their percent and come sorted by UUID",
			metric: MetricGPUUtil,
			vec: model.Vector{
				gpuRow("ml", "trainer-0", "GPU-bbbb", 3),
				gpuRow("research", "nb-7", "GPU-cccc", 97),
				gpuRow("ml", "trainer-0", "GPU-aaaa", 0),
			},
			wantPods: map[PodKey][]GPU{
				trainer:  {{ID: "GPU-aaaa", MaxPercent: 0}, {ID: "GPU-bbbb", MaxPercent: 3}},
				notebook: {{ID: "GPU-cccc", MaxPercent: 97}},
			},
		},
		{
			desc:   "GR_ENGINE_ACTIVE is a ratio: converted to percent; MIG instances are UUID/GPU_I_ID",
			metric: MetricGREngineActive,
			vec: model.Vector{
				migRow("ml", "trainer-0", "GPU-aaaa", "13", 0.995687),
				migRow("ml", "trainer-0", "GPU-aaaa", "2", 0.004),
				gpuRow("research", "nb-7", "GPU-cccc", 0.5),
			},
			wantPods: map[PodKey][]GPU{
				trainer:  {{ID: "GPU-aaaa/13", MaxPercent: 99.5687}, {ID: "GPU-aaaa/2", MaxPercent: 0.4}},
				notebook: {{ID: "GPU-cccc", MaxPercent: 50}},
			},
		},
		{
			desc:   "a GPU the query found doubtful (-1: stale, gapped, started late) is dropped, its siblings kept",
			metric: MetricGPUUtil,
			vec: model.Vector{
				gpuRow("ml", "trainer-0", "GPU-aaaa", 1),
				gpuRow("ml", "trainer-0", "GPU-bbbb", invalidValue),
				gpuRow("research", "nb-7", "GPU-cccc", invalidValue),
			},
			wantPods:    map[PodKey][]GPU{trainer: {{ID: "GPU-aaaa", MaxPercent: 1}}},
			wantDropped: map[PodKey]int{trainer: 1, notebook: 1},
		},
		{
			desc:   "a NaN answer (a NaN sample in the window) is dropped, never read as 0",
			metric: MetricGPUUtil,
			vec: model.Vector{
				gpuRow("ml", "trainer-0", "GPU-aaaa", math.NaN()),
				gpuRow("ml", "trainer-0", "GPU-bbbb", math.NaN()),
			},
			wantPods:    map[PodKey][]GPU{},
			wantDropped: map[PodKey]int{trainer: 2},
		},
		{
			desc:   "infinite and negative utilisation is not evidence",
			metric: MetricGREngineActive,
			vec: model.Vector{
				migRow("ml", "trainer-0", "GPU-aaaa", "1", math.Inf(1)),
				migRow("ml", "trainer-0", "GPU-aaaa", "2", math.Inf(-1)),
				migRow("ml", "trainer-0", "GPU-aaaa", "3", -0.5),
			},
			wantPods:    map[PodKey][]GPU{},
			wantDropped: map[PodKey]int{trainer: 3},
		},
		{
			desc:   "a series without a UUID cannot be told from the pod's other GPUs: dropped",
			metric: MetricGPUUtil,
			vec: model.Vector{
				sample(2, "namespace", "ml", "pod", "trainer-0"),
				gpuRow("ml", "trainer-0", "GPU-aaaa", 2),
			},
			wantPods:    map[PodKey][]GPU{trainer: {{ID: "GPU-aaaa", MaxPercent: 2}}},
			wantDropped: map[PodKey]int{trainer: 1},
		},
		{
			desc:   "rows without a namespace or pod belong to nobody and are ignored",
			metric: MetricGPUUtil,
			vec: model.Vector{
				sample(0, "pod", "trainer-0", "UUID", "GPU-aaaa"),
				sample(0, "namespace", "ml", "UUID", "GPU-aaaa"),
				sample(invalidValue, "UUID", "GPU-aaaa"),
			},
			wantPods: map[PodKey][]GPU{},
		},
		{
			desc:   "values above 100 are kept as they are (a busy GPU, not a doubtful one)",
			metric: MetricGREngineActive,
			vec:    model.Vector{gpuRow("ml", "trainer-0", "GPU-aaaa", 1.0002)},
			wantPods: map[PodKey][]GPU{
				trainer: {{ID: "GPU-aaaa", MaxPercent: 100.02}},
			},
		},
		{
			desc:   "one GPU twice in the answer is not an answer to this query",
			metric: MetricGPUUtil,
			vec: model.Vector{
				sample(1, "namespace", "ml", "pod", "trainer-0", "UUID", "GPU-aaaa", "container", "a"),
				sample(2, "namespace", "ml", "pod", "trainer-0", "UUID", "GPU-aaaa", "container", "b"),
			},
			wantErr: "answer holds GPU GPU-aaaa of pod ml/trainer-0 twice",
		},
		{
			desc:    "an unknown metric has no unit",
			metric:  "DCGM_FI_DEV_FB_USED",
			vec:     model.Vector{gpuRow("ml", "trainer-0", "GPU-aaaa", 2)},
			wantErr: `unsupported metric "DCGM_FI_DEV_FB_USED"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got := decode(Query{Metric: tt.metric, Window: time.Minute}, tt.vec, time.Time{}, false)
			if tt.wantErr != "" {
				require.EqualError(t, got.Err, tt.wantErr)
				require.Nil(t, got.Pods)
				require.Nil(t, got.Dropped)
				return
			}
			require.NoError(t, got.Err)
			require.Len(t, got.Pods, len(tt.wantPods))
			for pod, want := range tt.wantPods {
				require.Len(t, got.Pods[pod], len(want), "pod %s", pod)
				for i := range want {
					require.Equal(t, want[i].ID, got.Pods[pod][i].ID, "pod %s GPU %d", pod, i)
					require.InDelta(t, want[i].MaxPercent, got.Pods[pod][i].MaxPercent, 1e-9, "pod %s GPU %s", pod, want[i].ID)
				}
			}
			require.Equal(t, tt.wantDropped, got.Dropped)
		})
	}
}

// TestDecodeSlicesAreCapped checks that appending to one pod's GPUs cannot
// overwrite another pod's, although they share one backing array.
func TestDecodeSlicesAreCapped(t *testing.T) {
	got := decode(Query{Metric: MetricGPUUtil, Window: time.Minute}, model.Vector{
		gpuRow("a", "p", "GPU-1", 1),
		gpuRow("b", "q", "GPU-2", 2),
	}, time.Time{}, false)
	require.NoError(t, got.Err)
	p := got.Pods[PodKey{"a", "p"}]
	_ = append(p, GPU{ID: "GPU-x"})
	require.Equal(t, []GPU{{ID: "GPU-2", MaxPercent: 2}}, got.Pods[PodKey{"b", "q"}])
}

// benchVector is Expr's answer for pods GPU pods in random order: pods with
// 1, 2, 4 or 8 GPUs, every tenth pod on MIG instances, one GPU in a hundred
// doubtful — the shape of the answer for a large cluster.
func benchVector(pods int) model.Vector {
	r := rand.New(rand.NewPCG(1, 2))
	var vec model.Vector
	for p := range pods {
		ns := model.LabelValue(fmt.Sprintf("team-%d", p%200))
		pod := model.LabelValue(fmt.Sprintf("job-%d-worker-%d", p/8, p%8))
		n := []int{1, 2, 4, 8}[p%4]
		for g := range n {
			m := model.Metric{
				"namespace": ns,
				"pod":       pod,
				"UUID":      model.LabelValue(fmt.Sprintf("GPU-%08x-1d90-4c2e-9b7a-%012x", p, g)),
			}
			if p%10 == 0 {
				m["GPU_I_ID"] = model.LabelValue(fmt.Sprint(g + 1))
			}
			v := model.SampleValue(r.Float64() * 100)
			if r.IntN(100) == 0 {
				v = invalidValue
			}
			vec = append(vec, &model.Sample{Metric: m, Value: v, Timestamp: 1_700_000_000_000})
		}
	}
	r.Shuffle(len(vec), func(i, j int) { vec[i], vec[j] = vec[j], vec[i] })
	return vec
}

func BenchmarkDecode(b *testing.B) {
	vec := benchVector(50_000)
	b.ReportAllocs()
	b.ResetTimer()
	var res Result
	for b.Loop() {
		res = decode(Query{Metric: MetricGPUUtil, Window: time.Minute}, vec, time.Time{}, false)
	}
	b.StopTimer()
	if res.Err != nil || len(res.Pods) < 49_000 {
		b.Fatalf("decode: %v, %d pods", res.Err, len(res.Pods))
	}
	b.ReportMetric(float64(len(vec)), "gpus/op")
}
