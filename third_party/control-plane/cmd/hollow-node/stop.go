package main

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// StopAfterAnnotation on a pod makes its containers take that long (a Go duration, at most the
// grace period the kubelet gives) to exit once asked to stop: the runtime boundary's stand-in for
// a process that finishes its work after SIGTERM. Without it the fake runtime stops a container at
// once, so every victim would terminate in the order it was deleted.
const StopAfterAnnotation = "hollow-node.resize-guard.io/stop-after"

// slowStop wraps the CRI runtime client the kubelet uses (remote.NewRemoteRuntimeServiceBuilder's
// RuntimeService); only StopContainer changes, and only for annotated pods. The delay happens on
// the kubelet's side of the CRI call, inside the kubelet's own killContainer
// (pkg/kubelet/kuberuntime/kuberuntime_container.go), which passes the grace period as timeout.
type slowStop struct {
	internalapi.RuntimeService
}

func (s slowStop) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	if delay := s.stopAfter(ctx, containerID); delay > 0 {
		if limit := time.Duration(timeout) * time.Second; timeout > 0 && delay > limit {
			delay = limit
		}
		klog.FromContext(ctx).V(2).Info("Container exits after a delay", "containerID", containerID, "delay", delay)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
		}
	}
	return s.RuntimeService.StopContainer(ctx, containerID, timeout)
}

// stopAfter reads the annotation from the container's sandbox (the CRI carries pod annotations on
// PodSandboxConfig only); any error means no delay.
func (s slowStop) stopAfter(ctx context.Context, containerID string) time.Duration {
	containers, err := s.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: containerID})
	if err != nil || len(containers) == 0 {
		return 0
	}
	sandbox, err := s.PodSandboxStatus(ctx, containers[0].PodSandboxId, false)
	if err != nil || sandbox.GetStatus() == nil {
		return 0
	}
	raw, ok := sandbox.GetStatus().GetAnnotations()[StopAfterAnnotation]
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Ignoring annotation", "annotation", StopAfterAnnotation)
		return 0
	}
	return d
}
