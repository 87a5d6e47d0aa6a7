package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubemedic/kubemedic/policies/v1alpha1"
)

// LedgerName is the ConfigMap that serialises admissions.
const LedgerName = "kubemedic-admissions"

const ledgerKey = "reserved"

// ledger serialises admissions. The budgets are counted from operations in
// the API server, but two admissions decided on the same snapshot (two
// leaders, or one leader whose cache has not yet seen its own last
// admission) could each see room for one more. So every admission first
// writes its operation's name into one ConfigMap with an optimistic lock on
// the resourceVersion it read, and counts the names already there as
// running. Two admissions from one snapshot conflict, and the loser
// re-decides. A name stays until its operation is seen finished or gone, so a
// crash between the ledger write and the operation's status write is
// counted, never lost.
type ledger struct {
	client    client.Client
	reader    client.Reader // uncached
	namespace string
}

// load reads the ledger from the API server, creating it if missing.
func (l *ledger) load(ctx context.Context) (*corev1.ConfigMap, map[string]bool, error) {
	cm := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: l.namespace, Name: LedgerName}
	err := l.reader.Get(ctx, key, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: l.namespace, Name: LedgerName,
			Labels: map[string]string{"app.kubernetes.io/part-of": "kubemedic"}}}
		if err = l.client.Create(ctx, cm); apierrors.IsAlreadyExists(err) {
			err = l.reader.Get(ctx, key, cm)
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read admission ledger %s/%s: %w", l.namespace, LedgerName, err)
	}
	reserved := map[string]bool{}
	for _, name := range strings.Fields(cm.Data[ledgerKey]) {
		reserved[name] = true
	}
	return cm, reserved, nil
}

// reserve writes name into the ledger read as cm, dropping the names of
// operations that are finished or gone. A conflict means another admission
// won; the caller re-decides.
func (l *ledger) reserve(ctx context.Context, cm *corev1.ConfigMap, reserved map[string]bool, name string, ops map[string]*v1alpha1.NodeOperation) error {
	keep := []string{name}
	for r := range reserved {
		if r == name {
			continue
		}
		if op, ok := ops[r]; ok {
			if !op.Status.Phase.Finished() {
				keep = append(keep, r)
			}
			continue
		}
		// Not in the cache: gone, or too new for the cache. Ask.
		err := l.reader.Get(ctx, client.ObjectKey{Name: r}, &v1alpha1.NodeOperation{})
		if !apierrors.IsNotFound(err) {
			keep = append(keep, r)
		}
	}
	sort.Strings(keep)
	updated := cm.DeepCopy()
	if updated.Data == nil {
		updated.Data = map[string]string{}
	}
	updated.Data[ledgerKey] = strings.Join(keep, "\n")
	if err := l.client.Update(ctx, updated); err != nil {
		return fmt.Errorf("reserve %s in admission ledger: %w", name, err)
	}
	return nil
}

// withReserved adds to ops (read from the cache) the reserved operations the
// cache does not hold yet, read from the API server, so that admission counts
// every name in the ledger. Reserved operations that are gone are left out.
func (r *OperationReconciler) withReserved(ctx context.Context, ops []*v1alpha1.NodeOperation, reserved map[string]bool) ([]*v1alpha1.NodeOperation, error) {
	inCache := make(map[string]bool, len(ops))
	for _, o := range ops {
		inCache[o.Name] = true
	}
	for name := range reserved {
		if inCache[name] {
			continue
		}
		o := &v1alpha1.NodeOperation{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Name: name}, o); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read reserved operation %s: %w", name, err)
		}
		ops = append(ops, o)
	}
	return ops, nil
}
