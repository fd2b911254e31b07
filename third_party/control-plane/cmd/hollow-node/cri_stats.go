package main

import (
	"context"
	"fmt"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// usageStats wraps the CRI runtime client the kubelet uses (as slowStop in stop.go does); only
// the container stats calls change. The fake runtime's own ListContainerStats answers from
// stats set with FakeRuntimeService.SetFakeContainerStats (k8s.io/cri-api/pkg/apis/testing),
// which nothing sets, so the kubelet saw no container stats at all; here they come from the usage
// file (usage.go). The kubelet's CRI stats provider (pkg/kubelet/stats/cri_stats_provider.go,
// the one it uses for a runtime that is not CRI-O) reads them for /metrics/resource
// (ListPodCPUAndMemoryStats) and for its check before lowering a memory limit
// (PodCPUAndMemoryStats, called by kuberuntime's validateMemoryResizeAction).
type usageStats struct {
	internalapi.RuntimeService
	usage *usageBook
}

func (s usageStats) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return s.usage.containerStats(ctx, filter)
}

func (s usageStats) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	stats, err := s.usage.containerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: containerID})
	if err != nil {
		return nil, err
	}
	if len(stats) == 0 {
		// As FakeRuntimeService.ContainerStats answers for a container without stats.
		return nil, fmt.Errorf("no stats for container %q", containerID)
	}
	return stats[0], nil
}
