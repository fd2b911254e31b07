package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// resourceConfigForPod is cm.ResourceConfigForPod (pkg/kubelet/cm/helpers_linux.go) as v1.33–v1.35
// declare it, without MemoryQoS (cgroup v2 only).
func resourceConfigForPod(pod *v1.Pod, enforceCPULimits bool, cpuPeriod uint64) *cm.ResourceConfig {
	return cm.ResourceConfigForPod(pod, enforceCPULimits, cpuPeriod, false)
}
