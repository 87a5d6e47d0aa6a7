package kube

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kubeconfigFile is the part of a kubeconfig (clientcmd's v1 Config) that
// this package reads. Fields it does not know, such as preferences and
// extensions, are ignored as clientcmd ignores them; fields that would
// change who the requests are sent as are decoded so that their presence
// is an error rather than silently dropped.
type kubeconfigFile struct {
	CurrentContext string        `yaml:"current-context"`
	Clusters       []*namedEntry `yaml:"clusters"`
	Users          []*namedEntry `yaml:"users"`
	Contexts       []*namedEntry `yaml:"contexts"`
}

// namedEntry is one element of the clusters, users or contexts list; only
// the field of its list is set.
type namedEntry struct {
	Name    string             `yaml:"name"`
	Cluster *kubeconfigCluster `yaml:"cluster"`
	User    *kubeconfigUser    `yaml:"user"`
	Context *kubeconfigContext `yaml:"context"`
	line    int
}

// UnmarshalYAML records the entry's line for error messages.
func (e *namedEntry) UnmarshalYAML(n *yaml.Node) error {
	type plain namedEntry
	if err := n.Decode((*plain)(e)); err != nil {
		return err
	}
	e.line = n.Line
	return nil
}

type kubeconfigCluster struct {
	Server                   string `yaml:"server"`
	TLSServerName            string `yaml:"tls-server-name"`
	InsecureSkipTLSVerify    bool   `yaml:"insecure-skip-tls-verify"`
	CertificateAuthority     string `yaml:"certificate-authority"`
	CertificateAuthorityData string `yaml:"certificate-authority-data"`
	ProxyURL                 string `yaml:"proxy-url"`
	DisableCompression       bool   `yaml:"disable-compression"`
}

type kubeconfigUser struct {
	ClientCertificate     string `yaml:"client-certificate"`
	ClientCertificateData string `yaml:"client-certificate-data"`
	ClientKey             string `yaml:"client-key"`
	ClientKeyData         string `yaml:"client-key-data"`
	Token                 string `yaml:"token"`
	TokenFile             string `yaml:"tokenFile"`
	Username              string `yaml:"username"`
	Password              string `yaml:"password"`

	// Not supported: decoded only to refuse them.
	Impersonate          string              `yaml:"as"`
	ImpersonateUID       string              `yaml:"as-uid"`
	ImpersonateGroups    []string            `yaml:"as-groups"`
	ImpersonateUserExtra map[string][]string `yaml:"as-user-extra"`
	AuthProvider         any                 `yaml:"auth-provider"`
	Exec                 any                 `yaml:"exec"`
}

type kubeconfigContext struct {
	Cluster string `yaml:"cluster"`
	User    string `yaml:"user"`
}

// kubeconfigServer reads the kubeconfig at path and returns the API server
// of its current context, as clientcmd.BuildConfigFromFlags("", path)
// would for the fields kubeconfigFile lists. Relative file names in it are
// relative to the kubeconfig's directory. Errors name the file, and the
// line of the cluster, user or context entry at fault.
func kubeconfigServer(path string) (serverConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return serverConfig{}, fmt.Errorf("read kubeconfig: %w", err)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return serverConfig{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	cfg, err := parseKubeconfig(data, base)
	if err != nil {
		return serverConfig{}, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// parseKubeconfig is kubeconfigServer on the file's contents, with
// relative file names resolved against base.
func parseKubeconfig(data []byte, base string) (serverConfig, error) {
	var f kubeconfigFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		return serverConfig{}, err
	}
	return f.server(base)
}

func (f *kubeconfigFile) server(base string) (serverConfig, error) {
	if f.CurrentContext == "" {
		return serverConfig{}, errors.New("no current-context")
	}
	ctxEntry, err := find(f.Contexts, "contexts", f.CurrentContext)
	if err != nil {
		return serverConfig{}, err
	}
	if ctxEntry.Context == nil || ctxEntry.Context.Cluster == "" {
		return serverConfig{}, fmt.Errorf("line %d: context %q names no cluster", ctxEntry.line, ctxEntry.Name)
	}
	clEntry, err := find(f.Clusters, "clusters", ctxEntry.Context.Cluster)
	if err != nil {
		return serverConfig{}, fmt.Errorf("context %q: %w", ctxEntry.Name, err)
	}
	var cfg serverConfig
	if err := clEntry.Cluster.apply(&cfg, base); err != nil {
		return serverConfig{}, fmt.Errorf("line %d: cluster %q: %w", clEntry.line, clEntry.Name, err)
	}
	if ctxEntry.Context.User == "" {
		return cfg, nil
	}
	uEntry, err := find(f.Users, "users", ctxEntry.Context.User)
	if err != nil {
		return serverConfig{}, fmt.Errorf("context %q: %w", ctxEntry.Name, err)
	}
	if err := uEntry.User.apply(&cfg, base); err != nil {
		return serverConfig{}, fmt.Errorf("line %d: user %q: %w", uEntry.line, uEntry.Name, err)
	}
	return cfg, nil
}

// find returns the entry of list called name. Two entries with one name
// are an error, as in clientcmd.
func find(list []*namedEntry, field, name string) (*namedEntry, error) {
	var found *namedEntry
	for _, e := range list {
		if e == nil || e.Name != name {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("line %d: %s: duplicate name %q (also line %d)", e.line, field, name, found.line)
		}
		found = e
	}
	if found == nil {
		return nil, fmt.Errorf("%s: no entry named %q", field, name)
	}
	return found, nil
}

func (c *kubeconfigCluster) apply(cfg *serverConfig, base string) error {
	if c == nil || c.Server == "" {
		return errors.New("no server")
	}
	cfg.Host = c.Server
	cfg.Insecure = c.InsecureSkipTLSVerify
	cfg.ServerName = c.TLSServerName
	cfg.DisableCompression = c.DisableCompression
	if c.ProxyURL != "" {
		u, err := url.Parse(c.ProxyURL)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5") {
			return fmt.Errorf("proxy-url %q: want an http, https or socks5 URL", c.ProxyURL)
		}
		cfg.Proxy = http.ProxyURL(u)
	}
	var err error
	cfg.CAData, err = dataOrFile("certificate-authority", c.CertificateAuthorityData, c.CertificateAuthority, base)
	return err
}

func (u *kubeconfigUser) apply(cfg *serverConfig, base string) error {
	if u == nil {
		return nil
	}
	switch {
	case u.Exec != nil:
		return errors.New("exec credential plugins are not supported; use a token, tokenFile or client certificate")
	case u.AuthProvider != nil:
		return errors.New("auth-provider plugins are not supported; use a token, tokenFile or client certificate")
	case u.Impersonate != "" || u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0:
		return errors.New("impersonation (as, as-uid, as-groups, as-user-extra) is not supported")
	}
	if (u.Token != "" || u.TokenFile != "") && (u.Username != "" || u.Password != "") {
		return errors.New("more than one authentication method: a token and basic auth")
	}
	cfg.BearerToken = u.Token
	if u.TokenFile != "" {
		// client-go prefers the file, and falls back to token when the
		// file cannot be read.
		b, err := os.ReadFile(resolve(base, u.TokenFile))
		switch {
		case err == nil:
			cfg.BearerToken = strings.TrimSpace(string(b))
		case u.Token == "":
			return fmt.Errorf("tokenFile: %w", err)
		}
	}
	cfg.Username, cfg.Password = u.Username, u.Password
	if u.ClientCertificate == "" && u.ClientCertificateData == "" {
		return nil
	}
	var err error
	if cfg.CertData, err = dataOrFile("client-certificate", u.ClientCertificateData, u.ClientCertificate, base); err != nil {
		return err
	}
	if u.ClientKey == "" && u.ClientKeyData == "" {
		return errors.New("client-certificate without client-key or client-key-data")
	}
	cfg.KeyData, err = dataOrFile("client-key", u.ClientKeyData, u.ClientKey, base)
	return err
}

// dataOrFile returns the base64 data of field-data, or else the contents
// of field's file; setting both is an error, as in clientcmd.
func dataOrFile(field, data, file, base string) ([]byte, error) {
	switch {
	case data != "" && file != "":
		return nil, fmt.Errorf("%s and %s-data are both set", field, field)
	case data != "":
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(data))
		if err != nil {
			return nil, fmt.Errorf("%s-data: %w", field, err)
		}
		return b, nil
	case file != "":
		b, err := os.ReadFile(resolve(base, file))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return b, nil
	}
	return nil, nil
}

// resolve makes a relative file name in a kubeconfig relative to the
// kubeconfig's directory, as clientcmd.ResolveLocalPaths does.
func resolve(base, name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(base, name)
}
