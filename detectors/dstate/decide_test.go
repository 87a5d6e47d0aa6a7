package dstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/detectors/dstate/dstatetest"
	"github.com/kubemedic/kubemedic/detectors/kube"
	"github.com/kubemedic/kubemedic/detectors/plugin"
	"github.com/kubemedic/kubemedic/detectors/procfs"
)

// fakePods is a PodSource that records its calls.
type fakePods struct {
	pods  []kube.Pod
	err   error
	calls int
	node  string
}

func (f *fakePods) NodePods(_ context.Context, node string) ([]kube.Pod, string, error) {
	f.calls++
	f.node = node
	if f.err != nil {
		return nil, "", f.err
	}
	return f.pods, "kubelet", nil
}

const (
	uidA = "74c13223-5a00-4e7d-9f2e-3a2d5c1b6a77"
	uidB = "0b6a1f52-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
)

func dproc(pid int, start uint64, comm, uid string) Proc {
	p := Proc{Stat: procfs.Stat{PID: pid, Comm: comm, State: 'D', PPID: 1, StartTicks: start}, Cgroup: []byte("0::/system.slice/cron.service\n")}
	if uid != "" {
		p.Cgroup = []byte(dstatetest.PodCgroup(uid))
	}
	return p
}

func TestDecide(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	seen := func(boot string, s ...Sighting) State { return State{BootID: boot, Procs: s} }
	at := func(t time.Time) *time.Time { return &t }
	kthread := dproc(100, 5, "kworker/u8:2", uidA)
	kthread.PPID = 2
	sleeping := dproc(10, 100, "python3", uidA)
	sleeping.State = 'S'
	unreadable := dproc(10, 100, "python3", "")
	unreadable.Cgroup, unreadable.CgroupErr = nil, errors.New("read cgroup: permission denied")
	garbled := dproc(10, 100, "python3", "")
	garbled.Cgroup = []byte("garbage\n")

	for _, tc := range []struct {
		desc        string
		procs       []Proc
		scanErrs    int
		prev        State
		min         time.Duration
		pods        fakePods
		wantStatus  plugin.Status
		wantLine    string
		wantState   State
		wantAsked   bool
		wantOrphans int
	}{
		{
			desc:  "first sighting is under min duration",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 in D under 5m0s",
			wantState: seen("b1", Sighting{10, 100, now}),
		},
		{
			desc:  "first sighting counts with min duration 0",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, min: 0,
			wantStatus: plugin.StatusNonOK, wantLine: "DStateOrphans: 1 proc in D; pod " + uidA + " python3",
			wantState: seen("b1", Sighting{10, 100, now}), wantAsked: true, wantOrphans: 1,
		},
		{
			desc:  "under min duration",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(4 * time.Minute)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 in D under 5m0s",
			wantState: seen("b1", Sighting{10, 100, ago(4 * time.Minute)}),
		},
		{
			desc:  "exactly min duration, pod deleted",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(5 * time.Minute)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusNonOK, wantLine: "DStateOrphans: 1 proc in D; pod " + uidA + " python3",
			wantState: seen("b1", Sighting{10, 100, ago(5 * time.Minute)}), wantAsked: true, wantOrphans: 1,
		},
		{
			desc:  "over min duration, pod exists",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			pods:       fakePods{pods: []kube.Pod{{UID: uidA, Namespace: "ml", Name: "train-0"}}},
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 of live pods",
			wantState: seen("b1", Sighting{10, 100, ago(time.Hour)}), wantAsked: true,
		},
		{
			desc:  "pod Terminating within its grace period",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			pods:       fakePods{pods: []kube.Pod{{UID: uidA, Namespace: "ml", Name: "train-0", DeletionTimestamp: at(now.Add(time.Minute))}}},
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 of live pods",
			wantState: seen("b1", Sighting{10, 100, ago(time.Hour)}), wantAsked: true,
		},
		{
			desc:  "pod Terminating past its grace period",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			pods:       fakePods{pods: []kube.Pod{{UID: uidA, Namespace: "ml", Name: "train-0", DeletionTimestamp: at(ago(time.Minute))}}},
			wantStatus: plugin.StatusNonOK, wantLine: "DStateOrphans: 1 proc in D; pod " + uidA + " python3",
			wantState: seen("b1", Sighting{10, 100, ago(time.Hour)}), wantAsked: true, wantOrphans: 1,
		},
		{
			desc:  "process left D",
			procs: nil, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods",
			wantState: seen("b1"),
		},
		{
			desc:  "a process not in D is dropped",
			procs: []Proc{sleeping}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods",
			wantState: seen("b1"),
		},
		{
			desc:  "PID reuse starts over",
			procs: []Proc{dproc(10, 200, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 in D under 5m0s",
			wantState: seen("b1", Sighting{10, 200, now}),
		},
		{
			desc:  "new boot starts over",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b0", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods; 1 in D under 5m0s",
			wantState: seen("b1", Sighting{10, 100, now}),
		},
		{
			desc:  "a process in no pod is neither tracked nor asked about",
			procs: []Proc{dproc(10, 100, "rsync", "")}, min: 0,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods",
			wantState: seen("b1"),
		},
		{
			desc:  "a kernel thread is skipped",
			procs: []Proc{kthread}, min: 0,
			wantStatus: plugin.StatusOK, wantLine: "no D-state processes of deleted pods",
			wantState: seen("b1"),
		},
		{
			desc:  "pod source error is Unknown, and timing goes on",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			pods:       fakePods{err: errors.New("kubelet https://127.0.0.1:10250/pods: HTTP 403")},
			wantStatus: plugin.StatusUnknown, wantLine: "dstate: pods unknown: kubelet https://127.0.0.1:10250/pods: HTTP 403",
			wantState: seen("b1", Sighting{10, 100, ago(time.Hour)}), wantAsked: true,
		},
		{
			desc: "first orphan is the oldest, then the lowest PID",
			procs: []Proc{
				dproc(30, 300, "late", uidB), dproc(20, 200, "pt_main_thread", uidB), dproc(10, 100, "python3", uidA), dproc(40, 400, "young", uidA),
			},
			prev:       seen("b1", Sighting{10, 100, ago(10 * time.Minute)}, Sighting{20, 200, ago(time.Hour)}, Sighting{30, 300, ago(time.Hour)}),
			min:        5 * time.Minute,
			wantStatus: plugin.StatusNonOK, wantLine: "DStateOrphans: 3 procs in D; pod " + uidB + " pt_main_thread",
			wantState: seen("b1", Sighting{10, 100, ago(10 * time.Minute)}, Sighting{20, 200, ago(time.Hour)},
				Sighting{30, 300, ago(time.Hour)}, Sighting{40, 400, now}),
			wantAsked: true, wantOrphans: 3,
		},
		{
			desc:  "an unreadable cgroup is Unknown, and timing goes on",
			procs: []Proc{unreadable}, prev: seen("b1", Sighting{10, 100, ago(time.Hour)}), min: 5 * time.Minute,
			wantStatus: plugin.StatusUnknown, wantLine: "dstate: 1 proc unreadable: pid 10: read cgroup: permission denied",
			wantState: seen("b1", Sighting{10, 100, ago(time.Hour)}),
		},
		{
			desc:  "a cgroup that does not parse is Unknown",
			procs: []Proc{garbled}, min: 5 * time.Minute,
			wantStatus: plugin.StatusUnknown, wantLine: "dstate: 1 proc unreadable: pid 10: parse cgroup: line 1: want ID:controllers:path",
			wantState: seen("b1", Sighting{10, 100, now}),
		},
		{
			desc:  "unreadable processes do not hide orphans",
			procs: []Proc{dproc(10, 100, "python3", uidA)}, scanErrs: 3, min: 0,
			wantStatus: plugin.StatusNonOK, wantLine: "DStateOrphans: 1 proc in D; pod " + uidA + " python3",
			wantState: seen("b1", Sighting{10, 100, now}), wantAsked: true, wantOrphans: 1,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pods := tc.pods
			in := Input{BootID: "b1", Node: "gpu-1", Procs: tc.procs, Prev: tc.prev, Now: now, MinDuration: tc.min, ScanErrs: tc.scanErrs}
			if tc.scanErrs > 0 {
				in.ScanErr = errors.New("stat: garbage")
			}
			d := Decide(context.Background(), in, &pods)
			require.Equal(t, tc.wantStatus, d.Result.Status, d.Result.Line())
			require.Equal(t, tc.wantLine, d.Result.Line())
			require.LessOrEqual(t, len(d.Result.Line()), plugin.MaxLine)
			require.True(t, tc.wantState.Equal(d.State), "state %+v, want %+v", d.State, tc.wantState)
			require.Equal(t, tc.wantAsked, pods.calls == 1, "pod source calls: %d", pods.calls)
			require.LessOrEqual(t, pods.calls, 1)
			if tc.wantAsked {
				require.Equal(t, "gpu-1", pods.node)
			}
			require.Len(t, d.Orphans, tc.wantOrphans)
		})
	}
}

func TestDecideTellsDeletedFromTerminating(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	past := now.Add(-time.Minute)
	pods := &fakePods{pods: []kube.Pod{{UID: uidB, Namespace: "ml", Name: "train-1", DeletionTimestamp: &past}}}
	d := Decide(context.Background(), Input{
		BootID: "b1", Procs: []Proc{dproc(10, 100, "python3", uidA), dproc(20, 200, "python3", uidB)}, Now: now,
	}, pods)
	require.Len(t, d.Orphans, 2)
	require.Equal(t, uidA, d.Orphans[0].PodUID)
	require.Nil(t, d.Orphans[0].Pod, "pod A is gone")
	require.Equal(t, uidB, d.Orphans[1].PodUID)
	require.NotNil(t, d.Orphans[1].Pod, "pod B is Terminating")
	require.Equal(t, "train-1", d.Orphans[1].Pod.Name)
	require.Equal(t, "kubelet", d.PodSource)
}

func TestOrphansMessageFits(t *testing.T) {
	// A comm is at most 15 bytes and a pod UID 36, so a real line never
	// reaches MaxLine; these build longer inputs from MaxLine to exercise
	// the cut.
	long := strings.Repeat("c", plugin.MaxLine)
	fill := func(head string) string { return head + " " + long[:plugin.MaxLine-len(head)-1] }
	// A UID (longer than procfs.PodUID allows) that fills the line.
	longUID := strings.Repeat("f", plugin.MaxLine-len("DStateOrphans: 1 proc in D; pod "))
	for _, tc := range []struct {
		desc string
		n    int
		comm string
		uid  string
		want string
	}{
		{"short comm", 2, "python3", uidA, "DStateOrphans: 2 procs in D; pod " + uidA + " python3"},
		{"a 15-byte comm is whole", 3, "pt_main_thread1", uidA, "DStateOrphans: 3 procs in D; pod " + uidA + " pt_main_thread1"},
		{"long comm is cut", 3, long, uidA, fill("DStateOrphans: 3 procs in D; pod " + uidA)},
		{"odd bytes are replaced", 1, "a b\t\xffc", uidA, "DStateOrphans: 1 proc in D; pod " + uidA + " a_b??c"},
		{"a large count leaves less room", 1234567, long, uidA, fill("DStateOrphans: 1234567 procs in D; pod " + uidA)},
		{"no room leaves out the comm", 1, "python3", longUID, "DStateOrphans: 1 proc in D; pod " + longUID},
		{"empty comm", 1, "", uidA, "DStateOrphans: 1 proc in D; pod " + uidA},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			line := orphansResult(tc.n, Orphan{PID: 1, Comm: tc.comm, PodUID: tc.uid}).Line()
			require.Equal(t, tc.want, line)
			require.LessOrEqual(t, len(line), plugin.MaxLine)
			require.True(t, strings.Contains(line, tc.uid))
		})
	}
}

func TestStateEqual(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := State{BootID: "b", Procs: []Sighting{{1, 2, t0}}}
	require.True(t, a.Equal(State{BootID: "b", Procs: []Sighting{{1, 2, t0.In(time.Local)}}}))
	require.False(t, a.Equal(State{BootID: "c", Procs: []Sighting{{1, 2, t0}}}))
	require.False(t, a.Equal(State{BootID: "b", Procs: []Sighting{{1, 3, t0}}}))
	require.False(t, a.Equal(State{BootID: "b"}))
	require.True(t, State{BootID: "b"}.Equal(State{BootID: "b", Procs: []Sighting{}}))
}
