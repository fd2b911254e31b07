package main

import (
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// The runtime boundary's pod cgroups, common to every Kubernetes minor. The methods whose
// signatures differ between minors (cm.PodContainerManager gained klog.Logger parameters in
// v1.35 and v1.37; cm.ResourceConfigForPod a memory reservation policy in v1.36) are the
// exported adapters in podcgroups.v1.*.go, podlist.v1.*.go and resources.v1.*.go, which call the unexported
// implementations here.

// containerManager is kubemark's stub container manager with the node allocatable reservation and
// working pod cgroups.
type containerManager struct {
	cm.ContainerManager
	capacity    v1.ResourceList
	reservation v1.ResourceList
	pods        *podContainerManager
}

// GetNodeAllocatableAbsolute replaces containerManagerImpl.GetNodeAllocatableAbsolute
// (getNodeAllocatableAbsoluteImpl in pkg/kubelet/cm/node_container_manager_linux.go): the
// machine's capacity (cAdvisor: cpu, memory) minus the reservation, never negative. The v1.34–v1.35
// allocation manager judges Infeasible resizes against it ("Node didn't have enough capacity");
// the stub's nil would make every resize Infeasible.
func (m *containerManager) GetNodeAllocatableAbsolute() v1.ResourceList {
	out := v1.ResourceList{}
	for name, q := range m.capacity {
		value := q.DeepCopy()
		if r, ok := m.reservation[name]; ok {
			value.Sub(r)
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		out[name] = value
	}
	return out
}

// GetNodeAllocatableReservation replaces containerManagerImpl.GetNodeAllocatableReservation
// (pkg/kubelet/cm/node_container_manager_linux.go): system-reserved + kube-reserved + hard
// eviction thresholds, here --reserved-cpu/--reserved-memory (no eviction thresholds are set).
func (m *containerManager) GetNodeAllocatableReservation() v1.ResourceList {
	return m.reservation.DeepCopy()
}

// NewPodContainerManager replaces containerManagerImpl.NewPodContainerManager
// (pkg/kubelet/cm/container_manager_linux.go), which the stub answers with pod cgroups that
// cannot be read or written.
func (m *containerManager) NewPodContainerManager() cm.PodContainerManager {
	return m.pods
}

// podCgroup is one pod cgroup's cgroup v1 files: cpu.shares, cpu.cfs_quota_us,
// cpu.cfs_period_us, memory.limit_in_bytes.
type podCgroup struct {
	uid         types.UID
	name        cm.CgroupName
	created     time.Time
	cpuShares   uint64
	cpuQuota    int64
	cpuPeriod   uint64
	memoryLimit int64
}

// memoryUnlimited is what cgroup v1 memory.limit_in_bytes reads when unlimited (4 KiB pages).
const memoryUnlimited = int64(9223372036854771712)

// podCgroups is the in-memory cgroupfs of the pod cgroups, by literal cgroupfs name, and what
// their processes use (usage.go).
type podCgroups struct {
	mu     sync.Mutex
	byName map[string]*podCgroup
	usage  *usageBook
}

// cgroupSample is what the fake cAdvisor reports for one cgroup (cadvisor.v1.*.go): its
// creation, memory limit, memory usage (= working set = RSS) and cumulative CPU.
type cgroupSample struct {
	created     time.Time
	memoryLimit uint64
	memory      uint64
	cpuNanos    uint64
}

// sampleOf is the pod cgroup literally named `name`, with its usage; ok is false for any other
// name.
func (s *podCgroups) sampleOf(name string) (cgroupSample, bool) {
	s.mu.Lock()
	g, ok := s.byName[name]
	var info cgroupSample
	var uid types.UID
	if ok {
		info, uid = cgroupSample{memoryLimit: uint64(g.memoryLimit), created: g.created}, g.uid
	}
	s.mu.Unlock()
	if !ok {
		return info, false
	}
	info.memory, info.cpuNanos = s.usage.podUsage(string(uid))
	return info, true
}

// podContainerManager replaces podContainerManagerImpl (pkg/kubelet/cm/pod_container_manager_linux.go)
// on top of the in-memory pod cgroups; names follow its cgroupfs layout (kubepods/[burstable|besteffort]/pod<uid>).
type podContainerManager struct {
	cgroups          *podCgroups
	cpuPeriod        uint64
	enforceCPULimits bool
}

var _ cm.PodContainerManager = &podContainerManager{}

// GetPodContainerName mirrors podContainerManagerImpl.GetPodContainerName with the cgroupfs driver.
func (m *podContainerManager) GetPodContainerName(pod *v1.Pod) (cm.CgroupName, string) {
	parent := cm.NewCgroupName(cm.RootCgroupName, "kubepods")
	switch v1qos.GetPodQOS(pod) {
	case v1.PodQOSBurstable:
		parent = cm.NewCgroupName(parent, "burstable")
	case v1.PodQOSBestEffort:
		parent = cm.NewCgroupName(parent, "besteffort")
	}
	name := cm.NewCgroupName(parent, cm.GetPodCgroupNameSuffix(pod.UID))
	return name, name.ToCgroupfs()
}

// Exists mirrors podContainerManagerImpl.Exists.
func (m *podContainerManager) Exists(pod *v1.Pod) bool {
	_, literal := m.GetPodContainerName(pod)
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	_, ok := m.cgroups.byName[literal]
	return ok
}

// ensureExists mirrors podContainerManagerImpl.EnsureExists: a new cgroup (cgroup v1 defaults)
// with cm.ResourceConfigForPod applied. MemoryQoS needs cgroup v2, which this store does not model.
func (m *podContainerManager) ensureExists(logger klog.Logger, pod *v1.Pod) error {
	name, literal := m.GetPodContainerName(pod)
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	if _, ok := m.cgroups.byName[literal]; ok {
		return nil
	}
	g := &podCgroup{uid: pod.UID, name: name, created: time.Now(), cpuShares: 1024, cpuQuota: -1, cpuPeriod: 100000, memoryLimit: memoryUnlimited}
	g.set(resourceConfigForPod(pod, m.enforceCPULimits, m.cpuPeriod))
	m.cgroups.byName[literal] = g
	logger.V(4).Info("Created in-memory pod cgroup", "pod", klog.KObj(pod), "cgroup", literal)
	return nil
}

// set writes a ResourceConfig the way libcontainer's cgroup v1 Set does (cgroupCommon.Update):
// zero or absent values leave a file unchanged, a memory limit of -1 means unlimited.
func (g *podCgroup) set(rc *cm.ResourceConfig) {
	if rc == nil {
		return
	}
	if rc.Memory != nil && *rc.Memory != 0 {
		g.memoryLimit = *rc.Memory
		if *rc.Memory < 0 {
			g.memoryLimit = memoryUnlimited
		}
	}
	if rc.CPUShares != nil && *rc.CPUShares != 0 {
		g.cpuShares = *rc.CPUShares
	}
	if rc.CPUQuota != nil && *rc.CPUQuota != 0 {
		g.cpuQuota = *rc.CPUQuota
	}
	if rc.CPUPeriod != nil && *rc.CPUPeriod != 0 {
		g.cpuPeriod = *rc.CPUPeriod
	}
}

func (m *podContainerManager) get(literal string) (*podCgroup, error) {
	g, ok := m.cgroups.byName[literal]
	if !ok {
		return nil, fmt.Errorf("cgroup %s does not exist", literal)
	}
	return g, nil
}

// destroy mirrors podContainerManagerImpl.Destroy.
func (m *podContainerManager) destroy(name cm.CgroupName) error {
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	delete(m.cgroups.byName, name.ToCgroupfs())
	return nil
}

// reduceCPULimits mirrors cgroupCommon.ReduceCPULimits: cpu.shares to the minimum.
func (m *podContainerManager) reduceCPULimits(name cm.CgroupName) error {
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	g, err := m.get(name.ToCgroupfs())
	if err != nil {
		return err
	}
	g.cpuShares = cm.MinShares
	return nil
}

// allPodsFromCgroups mirrors podContainerManagerImpl.GetAllPodsFromCgroups.
func (m *podContainerManager) allPodsFromCgroups() (map[types.UID]cm.CgroupName, error) {
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	found := make(map[types.UID]cm.CgroupName, len(m.cgroups.byName))
	for _, g := range m.cgroups.byName {
		found[g.uid] = g.name
	}
	return found, nil
}

// IsPodCgroup mirrors podContainerManagerImpl.IsPodCgroup.
func (m *podContainerManager) IsPodCgroup(cgroupfs string) (bool, types.UID) {
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	if g, ok := m.cgroups.byName["/"+strings.Trim(cgroupfs, "/")]; ok {
		return true, g.uid
	}
	return false, ""
}

// GetPodCgroupMemoryUsage mirrors podContainerManagerImpl.GetPodCgroupMemoryUsage (memory.usage_in_bytes).
func (m *podContainerManager) GetPodCgroupMemoryUsage(pod *v1.Pod) (uint64, error) {
	_, literal := m.GetPodContainerName(pod)
	m.cgroups.mu.Lock()
	_, err := m.get(literal)
	m.cgroups.mu.Unlock()
	if err != nil {
		return 0, err
	}
	memory, _ := m.cgroups.usage.podUsage(string(pod.UID))
	return memory, nil
}

// GetPodCgroupConfig mirrors podContainerManagerImpl.GetPodCgroupConfig over cgroupV1impl.GetCgroupConfig.
func (m *podContainerManager) GetPodCgroupConfig(pod *v1.Pod, resourceName v1.ResourceName) (*cm.ResourceConfig, error) {
	_, literal := m.GetPodContainerName(pod)
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	g, err := m.get(literal)
	if err != nil {
		return nil, err
	}
	switch resourceName {
	case v1.ResourceCPU:
		shares, quota, period := g.cpuShares, g.cpuQuota, g.cpuPeriod
		return &cm.ResourceConfig{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period}, nil
	case v1.ResourceMemory:
		limit := g.memoryLimit
		return &cm.ResourceConfig{Memory: &limit}, nil
	}
	return nil, fmt.Errorf("unsupported resource %v for cgroup %v", resourceName, literal)
}

// setPodCgroupConfig mirrors podContainerManagerImpl.SetPodCgroupConfig over cgroupCommon.SetCgroupConfig.
func (m *podContainerManager) setPodCgroupConfig(logger klog.Logger, pod *v1.Pod, rc *cm.ResourceConfig) error {
	_, literal := m.GetPodContainerName(pod)
	m.cgroups.mu.Lock()
	defer m.cgroups.mu.Unlock()
	g, err := m.get(literal)
	if err != nil {
		return err
	}
	g.set(rc)
	logger.V(4).Info("Set in-memory pod cgroup", "pod", klog.KObj(pod), "cgroup", literal,
		"cpuShares", g.cpuShares, "cpuQuota", g.cpuQuota, "memoryLimit", g.memoryLimit)
	return nil
}
