package main

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// GetAllPodsFromCgroups as v1.33–v1.36 declare it (pkg/kubelet/cm/types.go): no logger.
func (m *podContainerManager) GetAllPodsFromCgroups() (map[types.UID]cm.CgroupName, error) {
	return m.allPodsFromCgroups()
}
