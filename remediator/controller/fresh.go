package controller

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// cacheCatchUp bounds how long a reconciler waits for the cache to hold its
// own write. The watch event usually arrives within milliseconds.
const cacheCatchUp = 2 * time.Second

// awaitOwnWrite waits until the cache no longer holds obj at resourceVersion
// was, the version the caller read and then wrote over. The next reconcile
// of obj then reads the write (or a later one) instead of the version it
// replaced, so its optimistically locked patch does not conflict with the
// reconciler's own last write: in a burst of node events, the policy status
// patch conflicted for that reason (test/scale/remediator), each conflict a
// retry after a backoff. obj's type and key are used; obj is not changed. A
// timeout or an error only ends the wait: the next patch then conflicts and
// is retried, as before.
func awaitOwnWrite(ctx context.Context, c client.Reader, obj client.Object, was string) {
	if was == "" || obj.GetResourceVersion() == was {
		return
	}
	probe := obj.DeepCopyObject().(client.Object)
	key := client.ObjectKeyFromObject(obj)
	err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, cacheCatchUp, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, probe); err != nil {
			return true, err
		}
		return probe.GetResourceVersion() != was, nil
	})
	if err != nil && ctx.Err() == nil {
		log.FromContext(ctx).V(1).Info("The cache has not shown our write yet", "object", key, "wrote", obj.GetResourceVersion(), "err", err)
	}
}

// awaitCached waits until the cache holds each of objs (nil entries are
// skipped): objects the caller has just created, which its next pass must
// see. Like awaitOwnWrite, a timeout or an error only ends the wait.
func awaitCached(ctx context.Context, c client.Reader, objs []client.Object) {
	ctx, cancel := context.WithTimeout(ctx, cacheCatchUp)
	defer cancel()
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		probe := obj.DeepCopyObject().(client.Object)
		key := client.ObjectKeyFromObject(obj)
		err := wait.PollUntilContextCancel(ctx, 2*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, key, probe)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return true, err
		})
		if err != nil {
			if ctx.Err() == nil {
				log.FromContext(ctx).V(1).Info("The cache has not shown our create yet", "object", key, "err", err)
			}
			return
		}
	}
}
