package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// resourceConfigForPod is cm.ResourceConfigForPod (pkg/kubelet/cm/helpers_linux.go) as v1.36 and
// v1.37 declare it, without MemoryQoS (cgroup v2 only) and so without a memory reservation policy.
func resourceConfigForPod(pod *v1.Pod, enforceCPULimits bool, cpuPeriod uint64) *cm.ResourceConfig {
	return cm.ResourceConfigForPod(pod, enforceCPULimits, cpuPeriod, false, "")
}
