package main

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// GetAllPodsFromCgroups as v1.37 declares it (pkg/kubelet/cm/types.go): with a logger.
func (m *podContainerManager) GetAllPodsFromCgroups(_ klog.Logger) (map[types.UID]cm.CgroupName, error) {
	return m.allPodsFromCgroups()
}
