package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// cm.PodContainerManager as v1.35–v1.37 declare it (pkg/kubelet/cm/types.go): a logger on every
// method that writes. GetAllPodsFromCgroups is in podlist.v1.*.go.

func (m *podContainerManager) EnsureExists(logger klog.Logger, pod *v1.Pod) error {
	return m.ensureExists(logger, pod)
}

func (m *podContainerManager) Destroy(_ klog.Logger, name cm.CgroupName) error {
	return m.destroy(name)
}

func (m *podContainerManager) ReduceCPULimits(_ klog.Logger, name cm.CgroupName) error {
	return m.reduceCPULimits(name)
}

func (m *podContainerManager) SetPodCgroupConfig(logger klog.Logger, pod *v1.Pod, rc *cm.ResourceConfig) error {
	return m.setPodCgroupConfig(logger, pod, rc)
}
