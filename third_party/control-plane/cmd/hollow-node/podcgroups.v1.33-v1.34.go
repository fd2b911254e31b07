package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// cm.PodContainerManager as v1.33 and v1.34 declare it (pkg/kubelet/cm/types.go): no loggers.
// GetAllPodsFromCgroups is in podlist.v1.*.go.

func (m *podContainerManager) EnsureExists(pod *v1.Pod) error {
	return m.ensureExists(klog.TODO(), pod)
}

func (m *podContainerManager) Destroy(name cm.CgroupName) error { return m.destroy(name) }

func (m *podContainerManager) ReduceCPULimits(name cm.CgroupName) error {
	return m.reduceCPULimits(name)
}

func (m *podContainerManager) SetPodCgroupConfig(pod *v1.Pod, rc *cm.ResourceConfig) error {
	return m.setPodCgroupConfig(klog.TODO(), pod, rc)
}
