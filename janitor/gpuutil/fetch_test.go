package gpuutil_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/stretchr/testify/require"

	"github.com/kubemedic/kubemedic/janitor/gpuutil"
)

// fakeAPI is the edge of the Prometheus HTTP API: /api/v1/query answered by
// a test-controlled function, with the requests it saw.
type fakeAPI struct {
	answer func(query string) (status int, body string)

	mu       sync.Mutex
	queries  []string
	params   []map[string]string
	inFlight int
	maxIn    int
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.params = append(f.params, map[string]string{"time": r.Form.Get("time"), "timeout": r.Form.Get("timeout")})
	f.inFlight++
	f.maxIn = max(f.maxIn, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	status, body := f.answer(q)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (f *fakeAPI) seen() (queries []string, params []map[string]string, maxInFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...), append([]map[string]string(nil), f.params...), f.maxIn
}

func startFake(t *testing.T, answer func(query string) (int, string)) (*fakeAPI, promv1.API) {
	t.Helper()
	f := &fakeAPI{answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, newAPI(t, srv.URL)
}

func newAPI(t testing.TB, address string) promv1.API {
	t.Helper()
	c, err := api.NewClient(api.Config{Address: address})
	require.NoError(t, err)
	return promv1.NewAPI(c)
}

const vectorAnswer = `{"status":"success","data":{"resultType":"vector","result":[
 {"metric":{"namespace":"ml","pod":"trainer-0","UUID":"GPU-b"},"value":[1700000000,"4"]},
 {"metric":{"namespace":"ml","pod":"trainer-0","UUID":"GPU-a"},"value":[1700000000,"0"]},
 {"metric":{"namespace":"ml","pod":"trainer-0","UUID":"GPU-c"},"value":[1700000000,"-1"]},
 {"metric":{"namespace":"ml","pod":"nb","UUID":"GPU-d"},"value":[1700000000,"NaN"]}
]}}`

func TestFetch(t *testing.T) {
	f, promAPI := startFake(t, func(string) (int, string) { return http.StatusOK, vectorAnswer })
	var observed atomic.Int32
	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{
		Timeout: 7 * time.Second,
		Observe: func(q gpuutil.Query, d time.Duration, err error) {
			observed.Add(1)
			if err != nil {
				t.Errorf("observe %s: %v", q, err)
			}
		},
	})
	now := time.Unix(1_700_000_000, 250_000_000)
	q20m := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: 20 * time.Minute}
	got := p.Fetch(context.Background(), []gpuutil.Query{q20m, q20m, q20m}, now)

	require.Len(t, got, 1)
	res := got[q20m]
	require.NoError(t, res.Err)
	trainer, nb := gpuutil.PodKey{Namespace: "ml", Name: "trainer-0"}, gpuutil.PodKey{Namespace: "ml", Name: "nb"}
	require.Equal(t, map[gpuutil.PodKey][]gpuutil.GPU{trainer: {{ID: "GPU-a", MaxPercent: 0}, {ID: "GPU-b", MaxPercent: 4}}}, res.Pods)
	require.Equal(t, map[gpuutil.PodKey]int{trainer: 1, nb: 1}, res.Dropped)
	require.Empty(t, res.Warnings)

	queries, params, _ := f.seen()
	require.Len(t, queries, 1, "a query asked three times is sent once")
	require.Equal(t, gpuutil.Expr(q20m, gpuutil.DefaultStaleness), queries[0])
	require.Equal(t, "1700000000.25", params[0]["time"], "evaluated at now")
	require.Equal(t, "7s", params[0]["timeout"], "the server stops where the client gives up")
	require.EqualValues(t, 1, observed.Load())
}

func TestFetchStalenessOption(t *testing.T) {
	f, promAPI := startFake(t, func(string) (int, string) { return http.StatusOK, vectorAnswer })
	q := gpuutil.Query{Metric: gpuutil.MetricGREngineActive, Window: 20 * time.Minute}
	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{Staleness: 90 * time.Second})
	require.NoError(t, p.Fetch(context.Background(), []gpuutil.Query{q}, time.Now())[q].Err)
	queries, _, _ := f.seen()
	require.Equal(t, []string{gpuutil.Expr(q, 90*time.Second)}, queries)
}

func TestFetchBoundsConcurrency(t *testing.T) {
	release := make(chan struct{})
	f, promAPI := startFake(t, func(string) (int, string) {
		<-release
		return http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[]}}`
	})
	p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{})
	var qs []gpuutil.Query
	for i := range 10 {
		qs = append(qs, gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: time.Duration(i+1) * time.Minute})
	}
	done := make(chan map[gpuutil.Query]gpuutil.Result)
	go func() { done <- p.Fetch(context.Background(), qs, time.Now()) }()
	require.Eventually(t, func() bool { _, _, maxIn := f.seen(); return maxIn == 4 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // give a fifth query the chance to start if the bound were broken
	close(release)
	got := <-done
	require.Len(t, got, 10)
	for q, res := range got {
		require.NoError(t, res.Err, "%s", q)
		require.Empty(t, res.Pods)
	}
	queries, _, maxIn := f.seen()
	require.Len(t, queries, 10)
	require.Equal(t, 4, maxIn)
}

func TestFetchErrors(t *testing.T) {
	q := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: 30 * time.Minute}
	tests := []struct {
		desc    string
		status  int
		body    string
		q       gpuutil.Query
		wantErr string
	}{
		{
			desc:    "Prometheus answers 503",
			status:  http.StatusServiceUnavailable,
			body:    "Service Unavailable",
			q:       q,
			wantErr: "server_error: server error: 503",
		},
		{
			desc:    "Prometheus reports a query error",
			status:  http.StatusUnprocessableEntity,
			body:    `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}`,
			q:       q,
			wantErr: "too many samples",
		},
		{
			desc:    "a matrix is not an answer to an instant query",
			status:  http.StatusOK,
			body:    `{"status":"success","data":{"resultType":"matrix","result":[]}}`,
			q:       q,
			wantErr: "answer is a matrix, not a vector",
		},
		{
			desc:    "a scalar is not an answer either",
			status:  http.StatusOK,
			body:    `{"status":"success","data":{"resultType":"scalar","result":[1700000000,"1"]}}`,
			q:       q,
			wantErr: "answer is a scalar, not a vector",
		},
		{
			desc:    "a body that is not JSON",
			status:  http.StatusOK,
			body:    `<html>proxy login</html>`,
			q:       q,
			wantErr: "bad_response",
		},
		{
			desc:    "an unknown metric is refused before asking",
			q:       gpuutil.Query{Metric: "DCGM_FI_DEV_FB_USED", Window: time.Hour},
			wantErr: `unsupported metric "DCGM_FI_DEV_FB_USED"`,
		},
		{
			desc:    "a window under a second is refused before asking",
			q:       gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: 500 * time.Millisecond},
			wantErr: "window 500ms is shorter than 1s",
		},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			f, promAPI := startFake(t, func(string) (int, string) { return tt.status, tt.body })
			var observedErr error
			p := gpuutil.NewPrometheus(promAPI, gpuutil.Options{Observe: func(_ gpuutil.Query, _ time.Duration, err error) { observedErr = err }})
			res := p.Fetch(context.Background(), []gpuutil.Query{tt.q}, time.Now())[tt.q]
			require.ErrorContains(t, res.Err, tt.wantErr)
			require.ErrorContains(t, res.Err, "query "+string(tt.q.Metric))
			require.Nil(t, res.Pods)
			require.Nil(t, res.Dropped)
			require.Equal(t, res.Err, observedErr)
			if tt.status == 0 {
				queries, _, _ := f.seen()
				require.Empty(t, queries)
			}
		})
	}
}

func TestFetchWarnings(t *testing.T) {
	_, promAPI := startFake(t, func(string) (int, string) {
		return http.StatusOK, `{"status":"success","warnings":["PromQL info: metric might not be a counter"],"data":{"resultType":"vector","result":[
 {"metric":{"namespace":"ml","pod":"p","UUID":"GPU-a"},"value":[1700000000,"2"]}]}}`
	})
	q := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: 20 * time.Minute}
	res := gpuutil.NewPrometheus(promAPI, gpuutil.Options{}).Fetch(context.Background(), []gpuutil.Query{q}, time.Now())[q]
	require.NoError(t, res.Err, "warnings are not fatal")
	require.Equal(t, []string{"PromQL info: metric might not be a counter"}, res.Warnings)
	require.Len(t, res.Pods, 1)
}

func TestFetchTimeout(t *testing.T) {
	stop := make(chan struct{})
	_, promAPI := startFake(t, func(string) (int, string) {
		<-stop
		return http.StatusOK, `{"status":"success","data":{"resultType":"vector","result":[]}}`
	})
	defer close(stop)
	q := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: time.Hour}
	begin := time.Now()
	res := gpuutil.NewPrometheus(promAPI, gpuutil.Options{Timeout: 200 * time.Millisecond}).
		Fetch(context.Background(), []gpuutil.Query{q}, time.Now())[q]
	require.ErrorIs(t, res.Err, context.DeadlineExceeded)
	require.Less(t, time.Since(begin), 5*time.Second)
}

func TestFetchCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, promAPI := startFake(t, func(string) (int, string) { return http.StatusOK, vectorAnswer })
	var qs []gpuutil.Query
	for i := range 6 {
		qs = append(qs, gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: time.Duration(i+1) * time.Minute})
	}
	got := gpuutil.NewPrometheus(promAPI, gpuutil.Options{}).Fetch(ctx, qs, time.Now())
	require.Len(t, got, 6)
	for q, res := range got {
		require.ErrorIs(t, res.Err, context.Canceled, "%s", q)
	}
}

// TestFetchUnreachable is Prometheus stopped: nothing listens on its port.
// The error must not leak a password from the configured URL.
func TestFetchUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	q := gpuutil.Query{Metric: gpuutil.MetricGPUUtil, Window: time.Hour}
	res := gpuutil.NewPrometheus(newAPI(t, "http://janitor:s3cret@"+addr), gpuutil.Options{}).
		Fetch(context.Background(), []gpuutil.Query{q}, time.Now())[q]
	require.Error(t, res.Err)
	require.ErrorContains(t, res.Err, "connection refused")
	require.NotContains(t, res.Err.Error(), "s3cret")
	var opErr interface{ Timeout() bool }
	require.True(t, errors.As(res.Err, &opErr), "the network error stays inspectable: %v", res.Err)
	require.Nil(t, res.Pods)
}
