package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const fixtures = "../testdata/kube"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	require.NoError(t, err)
	return b
}

func TestKubeconfigFixtures(t *testing.T) {
	for _, tc := range []struct {
		file string
		want serverConfig
	}{
		{"kind.kubeconfig", serverConfig{
			Host:     "https://127.0.0.1:6443",
			CAData:   fixture(t, "ca.crt"),
			CertData: fixture(t, "client.crt"),
			KeyData:  fixture(t, "client.key"),
		}},
		{"files.kubeconfig", serverConfig{
			Host:       "https://127.0.0.1:6443/k8s/clusters/c-m-4x7z9/",
			ServerName: "kubernetes.default.svc",
			CAData:     fixture(t, "ca.crt"),
			CertData:   fixture(t, "client.crt"),
			KeyData:    fixture(t, "client.key"),
		}},
		{"token.kubeconfig", serverConfig{
			Host:        "https://127.0.0.1:6443",
			CAData:      fixture(t, "ca.crt"),
			BearerToken: "eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.e30.sig",
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			// Relative names resolve against the kubeconfig's directory,
			// not the working directory (this package's).
			got, err := kubeconfigServer(filepath.Join(fixtures, tc.file))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}

	_, err := kubeconfigServer(filepath.Join(fixtures, "eks-exec.kubeconfig"))
	require.ErrorContains(t, err, "eks-exec.kubeconfig: line 16: user \"arn:aws:eks:us-west-2:123456789012:cluster/gpu\": exec credential plugins are not supported")
}

func TestKubeconfigErrors(t *testing.T) {
	ca := string(fixture(t, "ca.crt"))
	caData := "Y2EK" // "ca\n" in base64: decoded, not parsed as PEM here
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(caFile, []byte(ca), 0o600))

	cluster := func(extra string) string {
		return "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n" + extra
	}
	ctx := "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"
	user := func(fields string) string { return "users:\n- name: u\n  user:\n" + fields }
	for _, tc := range []struct {
		desc, yaml, err string
	}{
		{"empty file", "", "no current-context"},
		{"not YAML", "clusters: [", "yaml: line 1"},
		{"wrong type", "clusters: 3\n", "yaml: unmarshal errors:\n  line 1"},
		{"current context missing", "current-context: nope\n" + cluster(""), `contexts: no entry named "nope"`},
		{"cluster missing", "contexts:\n- name: x\n  context: {cluster: gone}\ncurrent-context: x\n", `context "x": clusters: no entry named "gone"`},
		{"context without cluster", "contexts:\n- name: x\n  context: {user: u}\ncurrent-context: x\n", `line 2: context "x" names no cluster`},
		{"user missing", cluster("") + ctx, `context "x": users: no entry named "u"`},
		{"duplicate cluster", cluster("") + "- name: c\n  cluster: {server: https://h}\n" + ctx + user("    token: t\n"), `line 5: clusters: duplicate name "c" (also line 2)`},
		{"no server", "clusters:\n- name: c\n  cluster: {}\n" + ctx + user("    token: t\n"), `line 2: cluster "c": no server`},
		{"CA twice", cluster("    certificate-authority: "+caFile+"\n    certificate-authority-data: "+caData+"\n") + ctx + user("    token: t\n"),
			"certificate-authority and certificate-authority-data are both set"},
		{"CA file missing", cluster("    certificate-authority: missing.crt\n") + ctx + user("    token: t\n"),
			"certificate-authority: open " + filepath.Join(dir, "missing.crt")},
		{"CA data not base64", cluster("    certificate-authority-data: '%%%'\n") + ctx + user("    token: t\n"), "certificate-authority-data: illegal base64"},
		{"bad proxy-url", cluster("    proxy-url: ftp://proxy:21\n") + ctx + user("    token: t\n"), `proxy-url "ftp://proxy:21"`},
		{"certificate without key", cluster("") + ctx + user("    client-certificate-data: "+caData+"\n"), "client-certificate without client-key"},
		{"certificate twice", cluster("") + ctx + user("    client-certificate-data: "+caData+"\n    client-certificate: c.crt\n    client-key-data: "+caData+"\n"),
			"client-certificate and client-certificate-data are both set"},
		{"token and basic auth", cluster("") + ctx + user("    token: t\n    username: admin\n    password: hunter2\n"), "more than one authentication method"},
		{"tokenFile missing", cluster("") + ctx + user("    tokenFile: /nonexistent/token\n"), "tokenFile: open /nonexistent/token"},
		{"auth-provider", cluster("") + ctx + user("    auth-provider:\n      name: gcp\n"), `line 10: user "u": auth-provider plugins are not supported`},
		{"exec", cluster("") + ctx + user("    exec:\n      command: get-token\n"), "exec credential plugins are not supported"},
		{"impersonation", cluster("") + ctx + user("    token: t\n    as: system:admin\n"), "impersonation (as, as-uid, as-groups, as-user-extra) is not supported"},
		{"impersonated groups", cluster("") + ctx + user("    token: t\n    as-groups: [system:masters]\n"), "impersonation"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			path := filepath.Join(dir, "kubeconfig")
			require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o600))
			_, err := kubeconfigServer(path)
			require.ErrorContains(t, err, tc.err)
			require.ErrorContains(t, err, "kubeconfig "+path, "errors name the file")
			require.NotContains(t, err.Error(), "hunter2")
		})
	}

	t.Run("an unreadable tokenFile falls back to token", func(t *testing.T) {
		path := filepath.Join(dir, "kubeconfig")
		require.NoError(t, os.WriteFile(path, []byte(cluster("")+ctx+user("    token: inline\n    tokenFile: /nonexistent/token\n")), 0o600))
		cfg, err := kubeconfigServer(path)
		require.NoError(t, err)
		require.Equal(t, "inline", cfg.BearerToken)
	})
	t.Run("no user: no credentials", func(t *testing.T) {
		path := filepath.Join(dir, "kubeconfig")
		require.NoError(t, os.WriteFile(path, []byte(cluster("    insecure-skip-tls-verify: true\n")+"contexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: x\n"), 0o600))
		cfg, err := kubeconfigServer(path)
		require.NoError(t, err)
		require.Equal(t, serverConfig{Host: "https://127.0.0.1:6443", Insecure: true}, cfg)
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := kubeconfigServer(filepath.Join(dir, "nope"))
		require.ErrorContains(t, err, "read kubeconfig: open "+filepath.Join(dir, "nope"))
	})
}

// request is what a fake API server saw.
type request struct {
	Path, Query, Auth string
	ClientCert        string
}

// apiServer serves nodes and pods over TLS with the fixture serving
// certificate, asking for (not requiring) a client certificate, and
// records each request. Pods come two to a page.
func apiServer(t *testing.T, prefix string, pods []string) (*httptest.Server, *[]request) {
	t.Helper()
	var seen []request
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := request{Path: r.URL.Path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization")}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			req.ClientCert = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		seen = append(seen, req)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case prefix + "/api/v1/nodes/gpu-1":
			_, _ = w.Write([]byte(`{"kind":"Node","metadata":{"name":"gpu-1","labels":{"nvidia.com/gpu.count":"8"}}}`))
		case prefix + "/api/v1/pods":
			start := 0
			if c := r.URL.Query().Get("continue"); c != "" {
				start = len(c)
			}
			end := min(start+2, len(pods))
			var items []map[string]any
			for _, uid := range pods[start:end] {
				items = append(items, map[string]any{"metadata": map[string]any{"uid": uid, "namespace": "ml", "name": "p-" + uid}})
			}
			cont := ""
			if end < len(pods) {
				cont = strings.Repeat("c", end)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"items": items, "metadata": map[string]any{"continue": cont}})
		default:
			http.Error(w, `{"kind":"Status","code":404}`, http.StatusNotFound)
		}
	}))
	cert, err := tls.LoadX509KeyPair(filepath.Join(fixtures, "server.crt"), filepath.Join(fixtures, "server.key"))
	require.NoError(t, err)
	clientCAs := x509.NewCertPool()
	require.True(t, clientCAs.AppendCertsFromPEM(fixture(t, "ca.crt")))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: clientCAs, ClientAuth: tls.VerifyClientCertIfGiven}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &seen
}

// writeKubeconfig copies a fixture kubeconfig and the files it names into
// a temporary directory, pointing it at url.
func writeKubeconfig(t *testing.T, name, url string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "client.crt", "client.key", "token"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), fixture(t, f), 0o600))
	}
	kc := strings.ReplaceAll(string(fixture(t, name)), "https://127.0.0.1:6443", url)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(kc), 0o600))
	return path
}

func TestKubeconfigAgainstTLSServer(t *testing.T) {
	ctx := context.Background()
	pods := []string{"u1", "u2", "u3", "u4", "u5"}

	t.Run("client certificate, CA data", func(t *testing.T) {
		srv, seen := apiServer(t, "", pods)
		c := New(Options{Kubeconfig: writeKubeconfig(t, "kind.kubeconfig", srv.URL), Timeout: 5 * time.Second})
		labels, err := c.NodeLabels(ctx, "gpu-1")
		require.NoError(t, err)
		require.Equal(t, map[string]string{"nvidia.com/gpu.count": "8"}, labels)

		got, source, err := c.NodePods(ctx, "gpu-1")
		require.NoError(t, err)
		require.Equal(t, "apiserver", source, "no kubelet URL: straight to the API server")
		require.Len(t, got, len(pods), "every page")
		require.Equal(t, "u5", got[4].UID)
		require.Len(t, *seen, 4)
		for _, r := range *seen {
			require.Equal(t, "kubemedic-detect", r.ClientCert)
			require.Empty(t, r.Auth)
		}
		require.Equal(t, "fieldSelector=spec.nodeName%3Dgpu-1&limit=500", (*seen)[1].Query)
		require.Equal(t, "continue=cc&fieldSelector=spec.nodeName%3Dgpu-1&limit=500", (*seen)[2].Query)
	})

	t.Run("files relative to the kubeconfig, a path prefix, tls-server-name", func(t *testing.T) {
		srv, seen := apiServer(t, "/k8s/clusters/c-m-4x7z9", pods)
		c := New(Options{Kubeconfig: writeKubeconfig(t, "files.kubeconfig", strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)), Timeout: 5 * time.Second})
		_, err := c.NodeLabels(ctx, "gpu-1")
		require.NoError(t, err, "the certificate is checked for kubernetes.default.svc, not localhost")
		require.Equal(t, "/k8s/clusters/c-m-4x7z9/api/v1/nodes/gpu-1", (*seen)[0].Path)
		require.Equal(t, "kubemedic-detect", (*seen)[0].ClientCert)
	})

	t.Run("token file", func(t *testing.T) {
		srv, seen := apiServer(t, "", pods)
		c := New(Options{Kubeconfig: writeKubeconfig(t, "token.kubeconfig", srv.URL), Timeout: 5 * time.Second})
		_, err := c.NodeLabels(ctx, "gpu-1")
		require.NoError(t, err)
		require.Equal(t, "Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6InRlc3QifQ.e30.sig", (*seen)[0].Auth)
		require.Empty(t, (*seen)[0].ClientCert)
	})

	t.Run("a server the CA did not sign", func(t *testing.T) {
		other := httptest.NewUnstartedServer(http.NotFoundHandler())
		other.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake
		other.StartTLS()
		t.Cleanup(other.Close)
		c := New(Options{Kubeconfig: writeKubeconfig(t, "token.kubeconfig", other.URL), Timeout: 5 * time.Second})
		_, err := c.NodeLabels(ctx, "gpu-1")
		require.ErrorContains(t, err, "certificate signed by unknown authority")
		require.NotContains(t, err.Error(), "eyJhbGci", "the token must not leak into errors")
	})
}

func TestInCluster(t *testing.T) {
	sa := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(sa, "token"), []byte("sa-token\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(sa, "ca.crt"), fixture(t, "ca.crt"), 0o600))
	env := func(host, port string) func(string) string {
		return func(k string) string {
			return map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}[k]
		}
	}

	srv, seen := apiServer(t, "", nil)
	host, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "https://"), ":")
	c := New(Options{Timeout: 5 * time.Second})
	c.getenv, c.serviceAccountDir = env(host, port), sa
	labels, err := c.NodeLabels(context.Background(), "gpu-1")
	require.NoError(t, err)
	require.Equal(t, "8", labels["nvidia.com/gpu.count"])
	require.Equal(t, "Bearer sa-token", (*seen)[0].Auth, "the token file is trimmed")

	cfg, err := inClusterConfig(env("fd00::1", "443"), sa)
	require.NoError(t, err)
	require.Equal(t, "https://[fd00::1]:443", cfg.Host)

	_, err = inClusterConfig(env("", ""), sa)
	require.ErrorContains(t, err, "KUBERNETES_SERVICE_HOST")
	_, err = inClusterConfig(env(host, port), t.TempDir())
	require.ErrorContains(t, err, "service account token")
	require.NoError(t, os.Remove(filepath.Join(sa, "ca.crt")))
	_, err = inClusterConfig(env(host, port), sa)
	require.ErrorContains(t, err, "service account CA")
}

func TestNewServer(t *testing.T) {
	for _, tc := range []struct {
		desc string
		cfg  serverConfig
		err  string
	}{
		{"no scheme", serverConfig{Host: "10.0.0.1:6443"}, `server "10.0.0.1:6443": want an https:// or http:// URL`},
		{"CA and insecure", serverConfig{Host: "https://h", CAData: fixture(t, "ca.crt"), Insecure: true}, "a CA and insecure-skip-tls-verify are both set"},
		{"CA not PEM", serverConfig{Host: "https://h", CAData: []byte("ca")}, "CA: no PEM certificate found"},
		{"key of another certificate", serverConfig{Host: "https://h", CertData: fixture(t, "client.crt"), KeyData: fixture(t, "server.key")}, "client certificate: tls: private key does not match public key"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, err := newServer(tc.cfg, time.Second)
			require.ErrorContains(t, err, tc.err)
		})
	}

	t.Run("plain HTTP carries no credentials", func(t *testing.T) {
		var auth []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			auth = append(auth, r.Header.Get("Authorization"))
			_, _ = w.Write([]byte(`{}`))
		}))
		t.Cleanup(srv.Close)
		for _, cfg := range []serverConfig{{Host: srv.URL, BearerToken: "t"}, {Host: srv.URL, Username: "u", Password: "p"}} {
			s, err := newServer(cfg, time.Second)
			require.NoError(t, err)
			require.NoError(t, s.getJSON(context.Background(), "/", &struct{}{}))
		}
		require.Equal(t, []string{"", ""}, auth)
	})
}

// FuzzKubeconfig checks that no kubeconfig makes the parser panic, and
// that what it accepts names a server.
func FuzzKubeconfig(f *testing.F) {
	for _, name := range []string{"kind.kubeconfig", "files.kubeconfig", "token.kubeconfig", "eks-exec.kubeconfig"} {
		b, err := os.ReadFile(filepath.Join(fixtures, name))
		require.NoError(f, err)
		f.Add(b)
	}
	base, err := filepath.Abs(fixtures)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := parseKubeconfig(b, base)
		if err == nil && cfg.Host == "" {
			t.Fatalf("accepted %q without a server", b)
		}
	})
}
