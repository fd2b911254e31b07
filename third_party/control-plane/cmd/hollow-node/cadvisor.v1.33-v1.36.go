package main

// cAdvisor as v1.33–v1.36 declare it: types from github.com/google/cadvisor/info/v1 and /v2,
// MachineInfo without a logger.

import (
	"time"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
)

// MachineInfo replaces cadvisorClient.MachineInfo (pkg/kubelet/cadvisor/cadvisor_linux.go); the
// kubelet's node status setter derives capacity from it (cadvisor.CapacityFromMachineInfo).
func (m *machine) MachineInfo() (*cadvisorapi.MachineInfo, error) {
	info, err := m.Fake.MachineInfo()
	if err != nil {
		return nil, err
	}
	info.NumCores = m.cores
	info.MemoryCapacity = m.memory
	return info, nil
}

// ContainerInfoV2 replaces cadvisorClient.ContainerInfoV2 (pkg/kubelet/cadvisor/cadvisor_linux.go)
// for the root and pod cgroups (machine.sampleOf): the kubelet reads a pod's memory usage from it
// before lowering a memory limit (kuberuntime validateMemoryResizeAction via
// cadvisorStatsProvider.PodCPUAndMemoryStats), and the node's from the root. Only the named
// cgroup is returned, also when the request is recursive: container cgroups are not modelled,
// their stats come from the CRI (cri_stats.go).
func (m *machine) ContainerInfoV2(name string, options cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerInfo, error) {
	s, ok := m.sampleOf(name)
	if !ok {
		return m.Fake.ContainerInfoV2(name, options)
	}
	return map[string]cadvisorapiv2.ContainerInfo{name: {
		Spec: cadvisorapiv2.ContainerSpec{
			CreationTime: s.created,
			HasCpu:       true,
			HasMemory:    true,
			Memory:       cadvisorapiv2.MemorySpec{Limit: s.memoryLimit},
		},
		Stats: []*cadvisorapiv2.ContainerStats{{
			Timestamp: time.Now(),
			Cpu:       &cadvisorapi.CpuStats{Usage: cadvisorapi.CpuUsage{Total: s.cpuNanos}},
			Memory:    &cadvisorapi.MemoryStats{Usage: s.memory, WorkingSet: s.memory, RSS: s.memory},
		}},
	}}, nil
}
