package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// serviceAccountDir is where the kubelet mounts a pod's service account
// token and its cluster's CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// userAgent is sent with every request, for the API server's audit log.
const userAgent = "kubemedic-detect"

// serverConfig says how to reach and authenticate to one HTTPS endpoint:
// the kubelet or the API server. It holds what client-go's rest.Config
// would for the credentials this package supports.
type serverConfig struct {
	// Host is the base URL: scheme, host and an optional path prefix,
	// without a trailing slash.
	Host string
	// BearerToken, or Username and Password, authenticate requests; at
	// most one of the two is set.
	BearerToken        string
	Username, Password string
	// CAData is PEM; none means the system roots.
	CAData   []byte
	Insecure bool
	// ServerName overrides the name the serving certificate is checked
	// against.
	ServerName string
	// CertData and KeyData are the PEM client certificate and key.
	CertData, KeyData  []byte
	Proxy              func(*http.Request) (*url.URL, error)
	DisableCompression bool
}

// server is a configured endpoint.
type server struct {
	cfg serverConfig
	hc  *http.Client
}

// newServer builds the HTTP client for cfg. timeout bounds each request,
// connection and body included.
func newServer(cfg serverConfig, timeout time.Duration) (*server, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("server %q: want an https:// or http:// URL", cfg.Host)
	}
	if u.Scheme == "http" {
		// client-go sends no credentials over plain HTTP either.
		cfg.BearerToken, cfg.Username, cfg.Password = "", "", ""
	}
	if cfg.BearerToken != "" && (cfg.Username != "" || cfg.Password != "") {
		return nil, errors.New("more than one authentication method: a token and basic auth")
	}
	u.RawQuery, u.Fragment = "", ""
	cfg.Host = strings.TrimRight(u.String(), "/")

	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.Insecure, ServerName: cfg.ServerName}
	if len(cfg.CAData) > 0 {
		if cfg.Insecure {
			return nil, errors.New("a CA and insecure-skip-tls-verify are both set")
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(cfg.CAData) {
			return nil, errors.New("CA: no PEM certificate found")
		}
	}
	if len(cfg.CertData) > 0 || len(cfg.KeyData) > 0 {
		cert, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	// client-go's transport settings, less HTTP/2: one short-lived
	// process makes one or two requests, and HTTP/1.1 sets up faster.
	tr := &http.Transport{
		Proxy:               proxy,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  cfg.DisableCompression,
		IdleConnTimeout:     90 * time.Second,
	}
	return &server{cfg: cfg, hc: &http.Client{Transport: tr, Timeout: timeout}}, nil
}

// getJSON GETs path (with its query) under the server's base URL and
// decodes the JSON answer into v. Errors never carry credentials.
func (s *server) getJSON(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Host+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	switch {
	case s.cfg.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+s.cfg.BearerToken)
	case s.cfg.Username != "" || s.cfg.Password != "":
		req.SetBasicAuth(s.cfg.Username, s.cfg.Password)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode response: %w", err)
	}
	return nil
}

// inClusterConfig is the API server as a pod sees it: the service's
// address from the environment, and the service account's token and CA
// under dir. Unlike client-go, a CA that cannot be read is an error rather
// than a fallback to the system roots, which never sign an API server's
// certificate anyway.
func inClusterConfig(getenv func(string) string, dir string) (serverConfig, error) {
	host, port := getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return serverConfig{}, errors.New("not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (or use --kubeconfig)")
	}
	token, err := os.ReadFile(filepath.Join(dir, "token"))
	if err != nil {
		return serverConfig{}, fmt.Errorf("service account token: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return serverConfig{}, fmt.Errorf("service account CA: %w", err)
	}
	return serverConfig{
		Host:        "https://" + net.JoinHostPort(host, port),
		BearerToken: strings.TrimSpace(string(token)),
		CAData:      ca,
	}, nil
}
