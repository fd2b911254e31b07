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
// for pod cgroups: the kubelet reads a pod's memory usage from it before lowering a memory limit
// (kuberuntime validateMemoryResizeAction via cadvisorStatsProvider.PodCPUAndMemoryStats).
func (m *machine) ContainerInfoV2(name string, options cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerInfo, error) {
	limit, created, ok := m.cgroups.memoryOf(name)
	if !ok {
		return m.Fake.ContainerInfoV2(name, options)
	}
	usage := m.cgroups.usage
	return map[string]cadvisorapiv2.ContainerInfo{name: {
		Spec: cadvisorapiv2.ContainerSpec{
			CreationTime: created,
			HasCpu:       true,
			HasMemory:    true,
			Memory:       cadvisorapiv2.MemorySpec{Limit: limit},
		},
		Stats: []*cadvisorapiv2.ContainerStats{{
			Timestamp: time.Now(),
			Memory:    &cadvisorapi.MemoryStats{Usage: usage, WorkingSet: usage, RSS: usage},
		}},
	}}, nil
}
