package localcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	// KwokNodeAnnotation marks the nodes kwok manages; CreateGPUNodes sets it.
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// KwokNodeAnnotationValue is the value of KwokNodeAnnotation kwok selects.
	KwokNodeAnnotationValue = "fake"

	// kwokStagesFile is the file in BinDir with kwok's node-fast,
	// node-heartbeat-with-lease and pod-fast Stages.
	kwokStagesFile = "kwok-stages.yaml"
	// kwokHeartbeatStage is the Stage whose delay is the node heartbeat period.
	kwokHeartbeatStage = "node-heartbeat-with-lease"
	// kwokPodReadyStage is the Stage that marks a bound pod Running.
	kwokPodReadyStage = "pod-ready"
	// kwokStartTimeout bounds how long kwok may take to serve /healthz.
	kwokStartTimeout = 30 * time.Second
)

// StartKwok starts kwok against the cluster's API server, for a Cluster
// created without Options.Kwok, and returns once kwok serves its health endpoint. It
// does nothing when kwok already runs. ctx bounds the start only.
func (e *Cluster) StartKwok(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return errors.New("start kwok: the cluster is stopped")
	}
	if e.kwok != nil {
		return nil
	}
	if err := checkBinaries(e.BinDir, "kwok", kwokStagesFile); err != nil {
		return err
	}
	stages, err := e.kwokStages()
	if err != nil {
		return err
	}
	stagesPath := filepath.Join(e.tmpDir, kwokStagesFile)
	if err := os.WriteFile(stagesPath, stages, 0o644); err != nil {
		return fmt.Errorf("write kwok stages: %w", err)
	}
	port, err := FreePort()
	if err != nil {
		return fmt.Errorf("start kwok: %w", err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	workDir := filepath.Join(e.tmpDir, "kwok-work")
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return fmt.Errorf("create kwok work dir: %w", err)
	}

	p, err := e.startProcessLocked(ProcessSpec{
		Name: "kwok",
		Path: filepath.Join(e.BinDir, "kwok"),
		// kwok otherwise also loads ~/.kwok/kwok.yaml, a developer's own config.
		Env: []string{"KWOK_WORKDIR=" + workDir},
		Args: []string{
			"--kubeconfig=" + e.Kubeconfig,
			"--config=" + stagesPath,
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=" + KwokNodeAnnotationValue,
			// Each node gets its own pod CIDR from CreateGPUNodes; this one
			// only serves nodes without.
			"--cidr=10.128.0.0/16",
			// Without this flag the kwok binary keeps no node leases at all
			// (only kwokctl passes it); 40 s is the kubelet's default.
			"--node-lease-duration-seconds=40",
			// The server is only used as a readiness signal (/healthz).
			"--server-address=" + addr,
		},
	})
	if err != nil {
		return err
	}
	e.logf("localcluster: starting kwok (pid %d, log %s)", p.PID(), p.LogPath())
	begin := time.Now()
	if err := p.WaitHTTPOK(ctx, "http://"+addr+"/healthz", kwokStartTimeout); err != nil {
		return errors.Join(fmt.Errorf("start kwok: %w", err), p.Stop())
	}
	e.logf("localcluster: kwok up in %s", time.Since(begin).Round(time.Millisecond))
	e.kwok = p
	return nil
}

// KwokPID returns the process id of kwok, or 0 when it does not run.
func (e *Cluster) KwokPID() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.kwok == nil {
		return 0
	}
	return e.kwok.PID()
}

// kwokErr returns an error with the end of kwok's log when kwok started and
// has exited since, and nil otherwise.
func (e *Cluster) kwokErr() error {
	e.mu.Lock()
	p := e.kwok
	e.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Exited()
}

// kwokStages returns the stages file of BinDir with the heartbeat delay of
// Options.KwokHeartbeat and the extra Options.KwokStages.
func (e *Cluster) kwokStages() ([]byte, error) {
	path := filepath.Join(e.BinDir, kwokStagesFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kwok stages: %w", err)
	}
	var out bytes.Buffer
	found, skipFound := false, false
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read kwok stages %s: %w", path, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		if e.opts.KwokHeartbeat > 0 || e.opts.KwokSkipPodsLabeled != "" {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, fmt.Errorf("parse kwok stages %s: %w", path, err)
			}
			meta, _ := obj["metadata"].(map[string]any)
			spec, _ := obj["spec"].(map[string]any)
			isStage := obj["kind"] == "Stage" && spec != nil
			changed := false
			if ms := e.opts.KwokHeartbeat.Milliseconds(); ms > 0 && isStage && meta["name"] == kwokHeartbeatStage {
				// kwok picks the delay uniformly in [duration, jitter).
				spec["delay"] = map[string]any{
					"durationMilliseconds":       ms,
					"jitterDurationMilliseconds": ms + ms/10 + 1,
				}
				found, changed = true, true
			}
			if label := e.opts.KwokSkipPodsLabeled; label != "" && isStage && meta["name"] == kwokPodReadyStage {
				sel, _ := spec["selector"].(map[string]any)
				if sel == nil {
					return nil, fmt.Errorf("kwok stages %s: Stage %s has no selector", path, kwokPodReadyStage)
				}
				exprs, _ := sel["matchExpressions"].([]any)
				sel["matchExpressions"] = append(exprs, map[string]any{
					"key": fmt.Sprintf(`.metadata.labels["%s"]`, label), "operator": "DoesNotExist",
				})
				skipFound, changed = true, true
			}
			if changed {
				if doc, err = yaml.Marshal(obj); err != nil {
					return nil, fmt.Errorf("write stage %v: %w", meta["name"], err)
				}
			}
		}
		out.WriteString("---\n")
		out.Write(doc)
		if !bytes.HasSuffix(doc, []byte("\n")) {
			out.WriteString("\n")
		}
	}
	if e.opts.KwokHeartbeat > 0 && !found {
		return nil, fmt.Errorf("kwok stages %s: no Stage %s to set the heartbeat of", path, kwokHeartbeatStage)
	}
	if e.opts.KwokSkipPodsLabeled != "" && !skipFound {
		return nil, fmt.Errorf("kwok stages %s: no Stage %s to keep pods labelled %s from", path, kwokPodReadyStage, e.opts.KwokSkipPodsLabeled)
	}
	for _, s := range e.opts.KwokStages {
		out.WriteString("---\n")
		out.WriteString(s)
		out.WriteString("\n")
	}
	return out.Bytes(), nil
}
