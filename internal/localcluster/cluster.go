package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// EnvTestBin names the environment variable holding the directory of the
// binaries from the testbin cache; the Makefile sets it to the output of
// `hack/testbin.sh --print`.
const EnvTestBin = "KUBEMEDIC_TESTBIN"

// modulePath identifies the repository's go.mod when looking for the repo root.
const modulePath = "github.com/kubemedic/kubemedic"

// controlPlaneStartTimeout bounds the start of etcd and of kube-apiserver each.
// They start in about 3 s; the margin is for a loaded 2-core CI machine
// running several test packages at once.
const controlPlaneStartTimeout = 60 * time.Second

// Options configures a Cluster. The zero value starts the control plane with
// kubemedic's CRDs and no kwok.
type Options struct {
	// CRDDir is the directory of CRD manifests to install. Empty means
	// <repo root>/deploy/crds; "-" installs none.
	CRDDir string
	// Kwok also starts kwok, managing the nodes annotated
	// kwok.x-k8s.io/node=fake (every node CreateGPUNodes makes): it makes
	// them Ready, keeps their leases, marks bound pods Running and completes
	// pods owned by a Job.
	Kwok bool
	// KwokHeartbeat is how often kwok re-posts the status of a Ready node (the
	// delay of its node-heartbeat-with-lease Stage). Zero keeps the delay of
	// the stages file, which kwok ships as 10 minutes; tests that watch
	// heartbeats set about a second.
	KwokHeartbeat time.Duration
	// KwokStages are extra kwok Stage documents (YAML) appended to the stages
	// file, e.g. one that fails pods with a given label.
	KwokStages []string
	// KwokSkipPodsLabeled: kwok's pod-ready Stage leaves pods with this
	// label alone, so they stay bound and Pending (a scale run's workload
	// pods, which kwok would take many minutes to run). Empty: none.
	KwokSkipPodsLabeled string
	// ThirdPartyCRDs also installs the CRDs of other projects that kubemedic
	// works with, from <BinDir>/thirdparty-crds (ThirdPartyCRDsDir), which
	// hack/testbin.sh fills from their released modules: Cluster API's
	// Cluster, Machine, MachineSet and MachineHealthCheck
	// (cluster.x-k8s.io, v1beta2 stored, v1beta1 served too) and Metal3's
	// BareMetalHost (metal3.io/v1alpha1). New waits until they are served.
	ThirdPartyCRDs bool
	// DRA starts kube-apiserver with the flags (DRAFlags) that make it serve
	// the beta DeviceTaintRule API, resource.k8s.io/v1beta2
	// devicetaintrules, besides the resource.k8s.io/v1 types it serves by
	// default (ResourceSlice, ResourceClaim, DeviceClass). Without it the
	// API server runs with its defaults and serves no DeviceTaintRule.
	DRA bool
	// Scheduler also starts the real kube-scheduler (StartScheduler) once
	// the control plane and kwok are up: pods without a nodeName are placed
	// as in a cluster, around cordons, taints and DeviceTaintRules.
	Scheduler bool
	// ControllerManager also starts the real kube-controller-manager with
	// the controllers of SchedulingControllers (StartControllerManager):
	// Deployments, Jobs and the rest create and delete their own pods.
	// Tests that make pods with CreatePod's OwnerDeployment, which plays
	// those controllers, must not set it.
	ControllerManager bool
	// Logf receives progress messages. Nil discards them.
	Logf func(format string, args ...any)
}

// Cluster is a running control plane. Its exported fields are set by New and
// must not be changed. Methods may be called from several goroutines.
type Cluster struct {
	// Config is an admin (system:masters) REST config for the API server.
	Config *rest.Config
	// Client is a controller-runtime client whose scheme knows client-go's
	// types and kubemedic's v1alpha1 types.
	Client client.Client
	// Clientset is a client-go clientset for the same API server.
	Clientset kubernetes.Interface
	// Scheme is the scheme of Client.
	Scheme *runtime.Scheme
	// Kubeconfig is the path of a kubeconfig file for the user
	// kubemedic-admin in group system:masters, usable by kubectl, NPD and
	// the kubemedic binaries. It is removed by Stop.
	Kubeconfig string
	// BinDir is the directory the binaries were taken from.
	BinDir string

	opts    Options
	logf    func(format string, args ...any)
	tmpDir  string
	testEnv *envtest.Environment
	cpLogs  []string // control plane log files, for error messages

	// mu guards kwok, components, procs and stopped.
	mu   sync.Mutex
	kwok *Process
	// components are kube-scheduler and kube-controller-manager by binary
	// name, once started.
	components map[string]*Process
	procs      []*Process // every process from StartProcess, kwok included, in start order
	stopped    bool
}

// New starts kube-apiserver and etcd, installs the CRDs, writes a kubeconfig
// and, with opts.Kwok, starts kwok. ctx bounds the start only: the processes
// run until Stop, which the caller must call. When New fails it has already
// stopped whatever it started.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	required := []string{"etcd", "kube-apiserver"}
	if opts.Kwok {
		required = append(required, "kwok", kwokStagesFile)
	}
	if opts.Scheduler {
		required = append(required, binScheduler)
	}
	if opts.ControllerManager {
		required = append(required, binControllerManager)
	}
	if err := checkBinaries(binDir, required...); err != nil {
		return nil, err
	}

	var crdPaths []string
	switch opts.CRDDir {
	case "-":
	case "":
		root, err := RepoRoot()
		if err != nil {
			return nil, fmt.Errorf("find the default CRD directory (set Options.CRDDir): %w", err)
		}
		crdPaths = []string{filepath.Join(root, "deploy", "crds")}
	default:
		crdPaths = []string{opts.CRDDir}
	}
	if opts.ThirdPartyCRDs {
		dir := filepath.Join(binDir, ThirdPartyCRDsDir)
		if info, err := os.Stat(dir); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("third-party CRDs missing: no directory %s; run hack/testbin.sh (`make testbin`) to build it", dir)
		}
		crdPaths = append(crdPaths, dir)
	}

	tmpDir, err := os.MkdirTemp("", "kubemedic-localcluster-")
	if err != nil {
		return nil, fmt.Errorf("create temp dir: %w", err)
	}
	e := &Cluster{BinDir: binDir, opts: opts, logf: logf, tmpDir: tmpDir}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()

	etcdPath, apiserverPath, err := e.wrapControlPlane()
	if err != nil {
		return nil, err
	}
	etcdLog, err := os.Create(filepath.Join(tmpDir, "etcd.log"))
	if err != nil {
		return nil, fmt.Errorf("create etcd log: %w", err)
	}
	defer etcdLog.Close()
	apiLog, err := os.Create(filepath.Join(tmpDir, "kube-apiserver.log"))
	if err != nil {
		return nil, fmt.Errorf("create kube-apiserver log: %w", err)
	}
	defer apiLog.Close()
	e.cpLogs = []string{etcdLog.Name(), apiLog.Name()}
	// etcd's data and the API server's certificates go to tmpDir too, so that
	// a killed test binary leaves one directory behind instead of three.
	etcdData, certDir := filepath.Join(tmpDir, "etcd-data"), filepath.Join(tmpDir, "apiserver-certs")
	for _, dir := range []string{etcdData, certDir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}

	e.Scheme = runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(e.Scheme); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	if err := v1alpha1.AddToScheme(e.Scheme); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}

	e.testEnv = &envtest.Environment{
		// Never USE_EXISTING_CLUSTER from the environment: New creates
		// nodes and pods and must not do so in a developer's real cluster.
		UseExistingCluster:       ptr.To(false),
		Scheme:                   e.Scheme,
		BinaryAssetsDirectory:    binDir,
		CRDDirectoryPaths:        crdPaths,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: controlPlaneStartTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		ControlPlane: envtest.ControlPlane{
			// Explicit paths win over KUBEBUILDER_ASSETS, which a developer
			// may have set for another project.
			Etcd:      &envtest.Etcd{Path: etcdPath, DataDir: etcdData, Out: etcdLog, Err: etcdLog},
			APIServer: &envtest.APIServer{Path: apiserverPath, CertDir: certDir, Out: apiLog, Err: apiLog},
		},
	}
	if opts.DRA {
		args := e.testEnv.ControlPlane.APIServer.Configure()
		for _, f := range DRAFlags {
			args.Append(f.Name, f.Value)
		}
	}
	logf("localcluster: starting etcd and kube-apiserver from %s", binDir)
	begin := time.Now()
	cfg, err := e.testEnv.Start()
	if err != nil {
		if e.testEnv.Config != nil {
			// The control plane is up; installing the CRDs failed.
			return nil, fmt.Errorf("install CRDs from %s: %w", strings.Join(crdPaths, ", "), err)
		}
		return nil, fmt.Errorf("start control plane: %w%s", err, e.controlPlaneLogTails())
	}
	e.Config = cfg
	if e.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("create clientset: %w", err)
	}
	if err := e.waitCRDsServed(ctx); err != nil {
		return nil, err
	}
	if opts.DRA {
		if err := e.waitServed(ctx, "/apis/"+draDeviceTaintRules); err != nil {
			return nil, err
		}
	}
	logf("localcluster: control plane up at %s in %s", cfg.Host, time.Since(begin).Round(time.Millisecond))

	user, err := e.testEnv.AddUser(envtest.User{Name: "kubemedic-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user kubemedic-admin: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("build kubeconfig: %w", err)
	}
	e.Kubeconfig = filepath.Join(tmpDir, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, fmt.Errorf("write kubeconfig: %w", err)
	}

	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}

	if opts.Kwok {
		if err := e.StartKwok(ctx); err != nil {
			return nil, err
		}
	}
	if opts.ControllerManager {
		if err := e.StartControllerManager(ctx); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := e.StartScheduler(ctx); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Stop stops the processes from StartProcess (kwok among them) in the
// reverse order of their start, stops kube-apiserver and etcd and removes
// the temporary files, the kubeconfig and the processes' default logs
// included. It is safe to call more than once; calls after the first return
// nil.
func (e *Cluster) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	procs := e.procs
	e.procs, e.kwok, e.components = nil, nil, nil
	e.mu.Unlock()

	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if e.testEnv != nil {
		if err := e.testEnv.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop control plane: %w", err))
		}
	}
	if e.tmpDir != "" {
		if err := os.RemoveAll(e.tmpDir); err != nil {
			errs = append(errs, fmt.Errorf("remove temp dir: %w", err))
		}
	}
	if len(errs) == 0 {
		e.logf("localcluster: stopped")
	}
	return errors.Join(errs...)
}

// StartProcess starts a process that belongs to the cluster, e.g. a
// node-problem-detector, Prometheus or a kubemedic binary pointed at
// Kubeconfig: Stop stops it before the control plane. An empty
// spec.LogPath logs to <Dir>/<name>.log, which Stop removes. The process
// runs until Stop or until it exits; Process.Exited tells which.
func (e *Cluster) StartProcess(spec ProcessSpec) (*Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.startProcessLocked(spec)
}

func (e *Cluster) startProcessLocked(spec ProcessSpec) (*Process, error) {
	if e.stopped {
		return nil, fmt.Errorf("start %s: the cluster is stopped", spec.Name)
	}
	if spec.LogPath == "" {
		name := spec.Name
		if name == "" {
			name = filepath.Base(spec.Path)
		}
		spec.LogPath = filepath.Join(e.tmpDir, name+".log")
	}
	// The cluster, not a request, bounds its processes' lives: Stop ends them.
	p, err := StartProcess(context.Background(), spec)
	if err != nil {
		return nil, err
	}
	e.procs = append(e.procs, p)
	return p, nil
}

// Dir returns the cluster's temporary directory, which holds the kubeconfig,
// etcd's data, the logs and anything the caller puts there. Stop removes it.
func (e *Cluster) Dir() string { return e.tmpDir }

// waitCRDsServed waits until every version of every installed CRD can be
// listed. envtest returns once the CRDs are in discovery, but for about a
// second after that the API server answers 429 with Retry-After: 1 while
// their storage initialises, and clients then sleep a full second (per
// resource) on their first request.
func (e *Cluster) waitCRDsServed(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, crd := range e.testEnv.CRDs {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			if err := e.waitServed(ctx, "/apis/"+crd.Spec.Group+"/"+v.Name+"/"+crd.Spec.Names.Plural); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitServed waits until the list at path (e.g.
// /apis/metal3.io/v1alpha1/baremetalhosts) answers, across all namespaces.
func (e *Cluster) waitServed(ctx context.Context, path string) error {
	rc := e.Clientset.Discovery().RESTClient()
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 25*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		lastErr = rc.Get().AbsPath(path).Param("limit", "1").MaxRetries(0).Do(ctx).Error()
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to be served: %w (last error: %v)", path, err, lastErr)
	}
	return nil
}

// BinDir returns the directory of the testbin binaries: $KUBEMEDIC_TESTBIN
// when set, otherwise what `hack/testbin.sh --print` prints in the
// repository that contains the working directory. It does not check that
// the binaries exist.
func BinDir() (string, error) {
	if dir := os.Getenv(EnvTestBin); dir != "" {
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%s is not set and %w; run `make testbin`", EnvTestBin, err)
	}
	script := filepath.Join(root, "hack", "testbin.sh")
	var stderr bytes.Buffer
	cmd := exec.Command(script, "--print")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("run %s --print: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("%s --print printed nothing", script)
	}
	return dir, nil
}

// Binary returns the path of the executable name (e.g. "prometheus",
// "node-problem-detector") in BinDir, or an error saying to run `make
// testbin` when it is missing.
func Binary(name string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	if err := checkBinaries(dir, name); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// checkBinaries returns an error naming every file missing from dir.
func checkBinaries(dir string, names ...string) error {
	var missing []string
	for _, name := range names {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || info.IsDir() || (name != kwokStagesFile && info.Mode().Perm()&0o111 == 0) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("binaries missing from %s: %s; run `make testbin` (or set %s)",
			dir, strings.Join(missing, ", "), EnvTestBin)
	}
	return nil
}

// RepoRoot walks up from the working directory to the directory whose go.mod
// declares kubemedic's module, where the CRDs, the example policies and
// hack/testbin.sh are.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && isModule(data, modulePath) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func isModule(goMod []byte, path string) bool {
	for line := range strings.Lines(string(goMod)) {
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" && strings.Trim(fields[1], `"`) == path {
			return true
		}
	}
	return false
}

// wrapControlPlane writes scripts that exec etcd and kube-apiserver under
// `setpriv --pdeathsig KILL`, so that they die with the test binary even when
// it is killed before Stop runs (envtest starts them itself, with no
// parent-death signal). Without setpriv it returns the real binaries.
func (e *Cluster) wrapControlPlane() (etcd, apiserver string, err error) {
	etcd = filepath.Join(e.BinDir, "etcd")
	apiserver = filepath.Join(e.BinDir, "kube-apiserver")
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		e.logf("localcluster: setpriv not found; etcd and kube-apiserver may outlive a killed test binary")
		return etcd, apiserver, nil
	}
	dir := filepath.Join(e.tmpDir, "bin")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create wrapper dir: %w", err)
	}
	wrap := func(real string) (string, error) {
		path := filepath.Join(dir, filepath.Base(real))
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL %s \"$@\"\n", shellQuote(setpriv), shellQuote(real))
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			return "", fmt.Errorf("write wrapper %s: %w", path, err)
		}
		return path, nil
	}
	if etcd, err = wrap(etcd); err != nil {
		return "", "", err
	}
	if apiserver, err = wrap(apiserver); err != nil {
		return "", "", err
	}
	return etcd, apiserver, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// controlPlaneLogTails returns the end of the etcd and kube-apiserver logs,
// formatted to be appended to an error.
func (e *Cluster) controlPlaneLogTails() string {
	var b strings.Builder
	for _, path := range e.cpLogs {
		b.WriteString(formatLogTail(path, 20))
	}
	return b.String()
}
