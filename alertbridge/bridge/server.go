package bridge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kubemedic/kubemedic/alertbridge/payload"
	"github.com/kubemedic/kubemedic/alertbridge/render"
)

// Handler serves /webhook, /healthz, /readyz and /metrics.
func (b *Bridge) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/webhook", b.serveWebhook)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", b.serveReady)
	mux.Handle("/metrics", promhttp.HandlerFor(b.opts.Gatherer, promhttp.HandlerOpts{}))
	return mux
}

// serveWebhook answers 200 only after the payload is in the journal.
func (b *Bridge) serveWebhook(w http.ResponseWriter, r *http.Request) {
	start := b.clock.Now()
	code, msg := b.acceptWebhook(w, r)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="kubemedic-alertbridge"`)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, msg)
	b.metrics.webhooks.WithLabelValues(strconv.Itoa(code)).Inc()
	b.metrics.latency.Observe(b.clock.Since(start).Seconds())
}

func (b *Bridge) acceptWebhook(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return http.StatusMethodNotAllowed, "use POST"
	}
	if err := b.auth.check(r); err != nil {
		if errors.Is(err, errUnauthorized) {
			b.log.Warn("Refusing webhook: bad or missing credentials", "remote", r.RemoteAddr)
			return http.StatusUnauthorized, "unauthorized"
		}
		b.log.Error("Reading webhook credentials", "err", err)
		return http.StatusInternalServerError, "cannot read the webhook credentials"
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, b.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			b.log.Warn("Refusing webhook: body too large", "remote", r.RemoteAddr, "limit", mbe.Limit)
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", mbe.Limit)
		}
		return http.StatusBadRequest, "reading the body: " + err.Error()
	}
	msg, err := payload.DecodeBytes(body)
	if err != nil {
		b.log.Warn("Refusing webhook", "remote", r.RemoteAddr, "err", err)
		return http.StatusBadRequest, err.Error()
	}
	_, hash, err := render.Key(b.cfg, msg)
	if err != nil {
		// The key template failed on this payload. Retrying cannot help.
		b.metrics.dropped.WithLabelValues("key_template").Inc()
		b.log.Error("Refusing webhook: dedupe key", "receiver", msg.Receiver, "err", err)
		return http.StatusBadRequest, err.Error()
	}
	// Until Run has queued the journal's older entries, a new one only goes
	// to the journal: Run queues it after them, in order.
	b.startMu.RLock()
	defer b.startMu.RUnlock()
	e, err := b.journal.Append(hash, body, b.clock.Now())
	if err != nil {
		// Alertmanager retries a 5xx: nothing is lost while the disk is bad.
		b.log.Error("Recording webhook in the journal", "err", err)
		return http.StatusServiceUnavailable, "cannot record the webhook durably; retry"
	}
	if b.synced.Load() {
		b.queue.push(job{id: e.ID, key: hash})
	}
	return http.StatusOK, "recorded " + e.ID
}

// serveReady is ready once the journal is open, which New required: from
// then on a webhook is recorded durably even while the cache is still being
// rebuilt from GitHub (or GitHub is down), so readiness does not wait for it.
func (b *Bridge) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !b.synced.Load() {
		_, _ = fmt.Fprintln(w, "ok: accepting webhooks; rebuilding the issue cache from GitHub")
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}
