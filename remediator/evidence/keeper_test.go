package evidence

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kubemedic/kubemedic/remediator/diagnostics"
	diagstore "github.com/kubemedic/kubemedic/remediator/diagnostics/store"
)

// countingKeeper is a Keeper with a store configured, reading its Secret
// from a fake API server, whose store clients are counted (and whose
// credentials are kept, to see which Secret each was built from).
func countingKeeper(t *testing.T, objs ...client.Object) (*Keeper, client.Client, func() []diagstore.Credentials) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	var mu sync.Mutex
	var built []diagstore.Credentials
	k := &Keeper{Client: c, Reader: c, Namespace: "kubemedic-system",
		Options: &Options{Store: diagstore.Config{Endpoint: "127.0.0.1:9000", Bucket: "b", Insecure: true}, Secret: "kubemedic-diagnostics"},
		newStore: func(cfg diagstore.Config, cred diagstore.Credentials) (*diagstore.Store, error) {
			mu.Lock()
			built = append(built, cred)
			mu.Unlock()
			return diagstore.New(cfg, cred)
		}}
	return k, c, func() []diagstore.Credentials {
		mu.Lock()
		defer mu.Unlock()
		return append([]diagstore.Credentials(nil), built...)
	}
}

func storeSecret(access, secret string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kubemedic-system", Name: "kubemedic-diagnostics"},
		Data: map[string][]byte{diagnostics.SecretAccessKey: []byte(access), diagnostics.SecretSecretKey: []byte(secret)}}
}

// setSecretKey updates the store's Secret with another secret key.
func setSecretKey(t *testing.T, c client.Client, secret string) *corev1.Secret {
	t.Helper()
	var sec corev1.Secret
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "kubemedic-system", Name: "kubemedic-diagnostics"}, &sec))
	sec.Data[diagnostics.SecretSecretKey] = []byte(secret)
	require.NoError(t, c.Update(context.Background(), &sec))
	return &sec
}

// The keeper builds one store client for an unchanged Secret, however
// many reconciles and the sweep ask at once, and a new one once the Secret
// changes or is made again; a Secret that is gone or unusable is an error
// at the next use, not a stale client.
func TestStoreIsBuiltOncePerSecret(t *testing.T) {
	ctx := context.Background()
	k, c, built := countingKeeper(t, storeSecret("first", "first-secret"))

	first, err := k.store(ctx)
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([]*diagstore.Store, 8)
	errs := make([]error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = k.store(ctx)
		}()
	}
	wg.Wait()
	for i := range 8 {
		require.NoError(t, errs[i])
		require.Same(t, first, got[i], "the same client for the same Secret")
	}
	require.Equal(t, []diagstore.Credentials{{AccessKey: "first", SecretKey: "first-secret"}}, built(), "built once")

	// The Secret is rotated: the next use builds a client with the new keys.
	sec := setSecretKey(t, c, "rotated-secret")
	rotated, err := k.store(ctx)
	require.NoError(t, err)
	require.NotSame(t, first, rotated)
	again, err := k.store(ctx)
	require.NoError(t, err)
	require.Same(t, rotated, again)
	require.Equal(t, []diagstore.Credentials{{AccessKey: "first", SecretKey: "first-secret"}, {AccessKey: "first", SecretKey: "rotated-secret"}}, built())

	// Deleted: an error that says so, as before the cache.
	require.NoError(t, c.Delete(ctx, sec))
	_, err = k.store(ctx)
	require.EqualError(t, err, "secret kubemedic-system/kubemedic-diagnostics does not exist")

	// Made again with no secret key: an error, and no client kept.
	require.NoError(t, c.Create(ctx, storeSecret("second", "")))
	_, err = k.store(ctx)
	require.ErrorContains(t, err, "secret kubemedic-system/kubemedic-diagnostics: diagnostics store: the credentials have no access key or no secret key")
	require.Nil(t, k.cached)

	// Fixed: a new client with the new Secret's keys.
	setSecretKey(t, c, "second-secret")
	fixed, err := k.store(ctx)
	require.NoError(t, err)
	require.NotSame(t, rotated, fixed)
	require.Equal(t, diagstore.Credentials{AccessKey: "second", SecretKey: "second-secret"}, built()[len(built())-1])
	require.Len(t, built(), 4, "one client per version of the Secret, the unusable one included")
}

// Without a store configured, the keeper reads no Secret and builds no
// client.
func TestNoStoreConfigured(t *testing.T) {
	k, _, built := countingKeeper(t)
	k.Options = nil
	_, err := k.store(context.Background())
	require.EqualError(t, err, "no diagnostics store configured")
	require.Empty(t, built())
}
