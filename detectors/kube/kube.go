package kube

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Options are the flags that say how to reach the kubelet and API server.
type Options struct {
	// Kubeconfig, when set, is used for the API server instead of the
	// in-cluster service account.
	Kubeconfig string
	// KubeletURL is the kubelet's base URL; "" skips the kubelet.
	KubeletURL string
	// TokenFile is the bearer token for the kubelet.
	TokenFile string
	// KubeletInsecure skips verifying the kubelet's serving certificate,
	// which is self-signed on most clusters.
	KubeletInsecure bool
	// Timeout bounds each request.
	Timeout time.Duration
}

// mirrorAnnotation on a mirror pod holds the static pod's UID.
const mirrorAnnotation = "kubernetes.io/config.mirror"

const serviceAccountToken = serviceAccountDir + "/token"

// BindFlags registers the options on fs.
func BindFlags(fs *pflag.FlagSet) *Options {
	o := &Options{}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig for the API server (default: in-cluster service account)")
	fs.StringVar(&o.KubeletURL, "kubelet-url", "https://127.0.0.1:10250", `the local kubelet ("" to use only the API server)`)
	fs.StringVar(&o.TokenFile, "token-file", serviceAccountToken, "bearer token for the kubelet")
	fs.BoolVar(&o.KubeletInsecure, "kubelet-insecure-tls", true, "do not verify the kubelet's (usually self-signed) serving certificate")
	fs.DurationVar(&o.Timeout, "kube-timeout", 5*time.Second, "timeout of each kubelet or API server request")
	return o
}

// Pod is the part of a Pod the detectors need.
type Pod struct {
	UID       string
	Namespace string
	Name      string
	// DeletionTimestamp is when the grace period of a Terminating pod ends.
	DeletionTimestamp *time.Time
}

type podList struct {
	Items []struct {
		Metadata struct {
			UID               string            `json:"uid"`
			Namespace         string            `json:"namespace"`
			Name              string            `json:"name"`
			DeletionTimestamp *time.Time        `json:"deletionTimestamp"`
			Annotations       map[string]string `json:"annotations"`
		} `json:"metadata"`
	} `json:"items"`
	Metadata struct {
		Continue string `json:"continue"`
	} `json:"metadata"`
}

type node struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
}

// Client talks to the kubelet and the API server.
type Client struct {
	opts Options
	// getenv and serviceAccountDir locate the in-cluster credentials;
	// tests point them elsewhere.
	getenv            func(string) string
	serviceAccountDir string
}

// New returns a client; nothing is read or contacted until a call.
func New(o Options) *Client {
	return &Client{opts: o, getenv: os.Getenv, serviceAccountDir: serviceAccountDir}
}

// apiServer is the API server from --kubeconfig, or else from the pod's
// service account.
func (c *Client) apiServer() (*server, error) {
	var cfg serverConfig
	var err error
	if c.opts.Kubeconfig != "" {
		cfg, err = kubeconfigServer(c.opts.Kubeconfig)
	} else {
		cfg, err = inClusterConfig(c.getenv, c.serviceAccountDir)
	}
	if err != nil {
		return nil, fmt.Errorf("API server config: %w", err)
	}
	s, err := newServer(cfg, c.opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("API server client: %w", err)
	}
	return s, nil
}

// NodeLabels returns the labels of the named node from the API server.
func (c *Client) NodeLabels(ctx context.Context, name string) (map[string]string, error) {
	if name == "" {
		return nil, errors.New("node labels: no node name (--node or $NODE_NAME)")
	}
	s, err := c.apiServer()
	if err != nil {
		return nil, err
	}
	var n node
	if err := s.getJSON(ctx, "/api/v1/nodes/"+url.PathEscape(name), &n); err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return n.Metadata.Labels, nil
}

// NodePods returns the pods bound to the named node, from the kubelet when
// it answers and from the API server (field selector spec.nodeName)
// otherwise. source says which answered. An error means neither did: the
// caller must treat the pod set as unknown, never as empty.
func (c *Client) NodePods(ctx context.Context, name string) (pods []Pod, source string, err error) {
	var kubeletErr error
	if c.opts.KubeletURL != "" {
		pods, kubeletErr = c.kubeletPods(ctx)
		if kubeletErr == nil {
			return pods, "kubelet", nil
		}
	}
	if name == "" {
		return nil, "", errors.Join(kubeletErr, errors.New("API server: no node name (--node or $NODE_NAME)"))
	}
	pods, apiErr := c.apiServerPods(ctx, name)
	if apiErr == nil {
		return pods, "apiserver", nil
	}
	return nil, "", errors.Join(kubeletErr, apiErr)
}

func (c *Client) kubeletPods(ctx context.Context) ([]Pod, error) {
	token, err := os.ReadFile(c.opts.TokenFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("kubelet: read token: %w", err)
	}
	s, err := newServer(serverConfig{Host: c.opts.KubeletURL, BearerToken: strings.TrimSpace(string(token)), Insecure: c.opts.KubeletInsecure}, c.opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("kubelet client: %w", err)
	}
	var l podList
	if err := s.getJSON(ctx, "/pods", &l); err != nil {
		return nil, fmt.Errorf("kubelet %s/pods: %w", c.opts.KubeletURL, err)
	}
	return l.pods(), nil
}

func (c *Client) apiServerPods(ctx context.Context, name string) ([]Pod, error) {
	s, err := c.apiServer()
	if err != nil {
		return nil, err
	}
	var pods []Pod
	cont := ""
	for {
		q := url.Values{"fieldSelector": {"spec.nodeName=" + name}, "limit": {"500"}}
		if cont != "" {
			q.Set("continue", cont)
		}
		var l podList
		if err := s.getJSON(ctx, "/api/v1/pods?"+q.Encode(), &l); err != nil {
			return nil, fmt.Errorf("list pods on node %s: %w", name, err)
		}
		pods = append(pods, l.pods()...)
		if cont = l.Metadata.Continue; cont == "" {
			return pods, nil
		}
	}
}

func (l *podList) pods() []Pod {
	out := make([]Pod, 0, len(l.Items))
	for _, it := range l.Items {
		uid := it.Metadata.UID
		// A static pod runs in a cgroup named after the kubelet's hash of
		// its manifest; the API server knows only its mirror pod, whose own
		// UID differs and whose annotation holds that hash.
		if hash := it.Metadata.Annotations[mirrorAnnotation]; hash != "" {
			uid = hash
		}
		out = append(out, Pod{UID: uid, Namespace: it.Metadata.Namespace, Name: it.Metadata.Name, DeletionTimestamp: it.Metadata.DeletionTimestamp})
	}
	return out
}
