package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// cm.PodContainerManager as v1.37 declares it (pkg/kubelet/cm/types.go): a logger on every
// method that writes.

func (m *podContainerManager) EnsureExists(logger klog.Logger, pod *v1.Pod) error {
	return m.ensureExists(logger, pod)
}

func (m *podContainerManager) Destroy(_ klog.Logger, name cm.CgroupName) error {
	return m.destroy(name)
}

func (m *podContainerManager) ReduceCPULimits(_ klog.Logger, name cm.CgroupName) error {
	return m.reduceCPULimits(name)
}

func (m *podContainerManager) GetAllPodsFromCgroups(_ klog.Logger) (map[types.UID]cm.CgroupName, error) {
	return m.allPodsFromCgroups()
}

func (m *podContainerManager) SetPodCgroupConfig(logger klog.Logger, pod *v1.Pod, rc *cm.ResourceConfig) error {
	return m.setPodCgroupConfig(logger, pod, rc)
}
