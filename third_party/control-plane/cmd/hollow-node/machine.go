package main

import (
	"time"

	cadvisortest "k8s.io/kubernetes/pkg/kubelet/cadvisor/testing"
)

// machine is the fake cAdvisor: kubemark's cadvisortest.Fake with the machine size configurable
// and the pod and root cgroups' usage from the usage file (usage.go). Its MachineInfo and
// ContainerInfoV2 are in cadvisor.v1.*.go: cAdvisor's types moved and MachineInfo gained a logger
// in v1.37 (pkg/kubelet/cadvisor/types.go Interface).
type machine struct {
	cadvisortest.Fake
	cores   int
	memory  uint64
	started time.Time
	cgroups *podCgroups
}

func newMachine(nodeName string, cores int, memory uint64, cgroups *podCgroups) *machine {
	return &machine{Fake: cadvisortest.Fake{NodeName: nodeName}, cores: cores, memory: memory, started: time.Now(), cgroups: cgroups}
}

// sampleOf answers ContainerInfoV2 for the cgroups the fake knows: the root cgroup "/" (the
// node: the kubelet's summary, /metrics/resource's node_* series, reads it and fails without it,
// pkg/kubelet/server/stats/summary.go GetCPUAndMemoryStats) and the pod cgroups. ok is false for
// any other name.
func (m *machine) sampleOf(name string) (cgroupSample, bool) {
	if name == "/" {
		memory, cpu := m.cgroups.usage.nodeUsage()
		return cgroupSample{created: m.started, memoryLimit: m.memory, memory: memory, cpuNanos: cpu}, true
	}
	return m.cgroups.sampleOf(name)
}
