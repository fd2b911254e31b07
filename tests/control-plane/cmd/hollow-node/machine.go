package main

import (
	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
)

// machine is the fake cAdvisor: kubemark's cadvisortest.Fake with the machine size and pod memory
// usage configurable. Its MachineInfo and ContainerInfoV2 are in cadvisor.v1.*.go: cAdvisor's
// types moved and MachineInfo gained a logger in v1.37 (pkg/kubelet/cadvisor/types.go Interface).
type machine struct {
	cadvisortest.Fake
	cores   int
	memory  uint64
	cgroups *podCgroups
}

func newMachine(nodeName string, cores int, memory uint64, cgroups *podCgroups) *machine {
	return &machine{Fake: cadvisortest.Fake{NodeName: nodeName}, cores: cores, memory: memory, cgroups: cgroups}
}
