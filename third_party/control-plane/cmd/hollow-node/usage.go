package main

// The resource usage of the hollow node's containers: what a real node's cgroups would count,
// set by the test through a file and reported at both stats boundaries the kubelet reads — the
// CRI's container stats (cri_stats.go, which /metrics/resource and the kubelet's own resize check
// read per container) and cAdvisor's pod and root cgroups (cadvisor.v1.*.go) — so that
// metrics-server's numbers and the kubelet's own decisions agree.
//
// The file (--usage-file, default <work-dir>/usage.json) maps "<namespace>/<pod>/<container>" to
// {"memory": "<quantity>", "cpu": "<quantity>"}, both optional. It is re-read whenever it changes
// (write it to a temporary name and rename it over); a file that does not parse is logged and the
// previous contents stay in force.
//
//   - A container with an entry has CRI stats: memory usage = working set = RSS = its "memory";
//     cumulative CPU = cpuStartCost + its "cpu" rate integrated over time since it was created
//     (a rate change applies from the file's modification time).
//   - A container without one has no CRI stats, as before this file existed: the kubelet sees no
//     container usage, and /metrics/resource lists no such container.
//   - A pod cgroup reports the sum over its running containers with an entry; with none, it
//     reports --pod-memory-usage and no CPU (the kubelet compares a pod's memory limit with it).
//   - The root cgroup ("/", the node) reports the sum over all containers with an entry.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/klog/v2"
	kubetypes "k8s.io/kubelet/pkg/types"
)

// cpuStartCost is the CPU every container has used once it exists (a real one spends some
// starting its process). metrics-server drops a container whose cumulative CPU is 0
// (checkContainerMetrics in pkg/scraper/client/resource/decode.go), so a container with no "cpu"
// still shows in the metrics API, with a rate of 0.
const cpuStartCost = time.Millisecond

// usageEntry is one container's line of the usage file.
type usageEntry struct {
	Memory string `json:"memory,omitempty"`
	CPU    string `json:"cpu,omitempty"`
}

// containerRate is a parsed entry: memory in bytes, CPU in nanocores.
type containerRate struct {
	memory    uint64
	nanoCores uint64
}

// cpuCounter integrates one container's CPU rate.
type cpuCounter struct {
	at        time.Time
	nanos     float64
	nanoCores uint64
}

// fileStamp tells whether the usage file changed (a rename gives a new inode).
type fileStamp struct {
	inode   uint64
	size    int64
	modTime time.Time
}

// usageBook is the node's usage: the file's entries, the CPU counters of the containers, and the
// fake runtime's containers (the in-process fake CRI the kubelet talks to over gRPC).
type usageBook struct {
	path              string
	fallbackPodMemory uint64
	runtime           *apitest.FakeRuntimeService

	mu      sync.Mutex
	stamp   fileStamp
	entries map[string]containerRate
	cpu     map[string]*cpuCounter
}

func newUsageBook(path string, fallbackPodMemory uint64, runtime *apitest.FakeRuntimeService) *usageBook {
	return &usageBook{path: path, fallbackPodMemory: fallbackPodMemory, runtime: runtime,
		entries: map[string]containerRate{}, cpu: map[string]*cpuCounter{}}
}

// parseUsage reads the usage file's JSON.
func parseUsage(data []byte) (map[string]containerRate, error) {
	var raw map[string]usageEntry
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	out := make(map[string]containerRate, len(raw))
	for key, e := range raw {
		var r containerRate
		for _, f := range []struct {
			name, value string
			into        *uint64
			nano        bool
		}{{"memory", e.Memory, &r.memory, false}, {"cpu", e.CPU, &r.nanoCores, true}} {
			if f.value == "" {
				continue
			}
			q, err := resource.ParseQuantity(f.value)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", key, f.name, err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("%s: %s %s is negative", key, f.name, f.value)
			}
			if f.nano {
				*f.into = uint64(q.ScaledValue(resource.Nano))
			} else {
				*f.into = uint64(q.Value())
			}
		}
		out[key] = r
	}
	return out, nil
}

// reload re-reads the file if it changed; caller holds mu. Counters are advanced to the file's
// modification time at their old rates first, so a new rate counts from when it was written.
func (b *usageBook) reload(now time.Time) {
	if b.path == "" {
		return
	}
	var stamp fileStamp
	info, err := os.Stat(b.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		klog.ErrorS(err, "Cannot read the usage file; keeping the previous usage", "path", b.path)
		return
	default:
		stamp = fileStamp{size: info.Size(), modTime: info.ModTime()}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			stamp.inode = st.Ino
		}
	}
	if stamp == b.stamp {
		return
	}
	b.stamp = stamp
	entries := map[string]containerRate{}
	if info != nil {
		data, err := os.ReadFile(b.path)
		if err == nil {
			entries, err = parseUsage(data)
		}
		if err != nil {
			klog.ErrorS(err, "Invalid usage file; keeping the previous usage", "path", b.path)
			return
		}
	}
	switchAt := now
	if info != nil && info.ModTime().Before(now) {
		switchAt = info.ModTime()
	}
	for _, c := range b.cpu {
		c.advance(switchAt)
	}
	b.entries = entries
	klog.V(2).InfoS("Loaded the usage file", "path", b.path, "containers", len(entries))
}

func (c *cpuCounter) advance(to time.Time) {
	if to.After(c.at) {
		c.nanos += float64(c.nanoCores) * to.Sub(c.at).Seconds()
		c.at = to
	}
}

// containerKey is the usage file's key of a CRI container, from the labels the kubelet puts on it
// (pkg/kubelet/kuberuntime/labels.go newContainerLabels).
func containerKey(c *runtimeapi.Container) string {
	l := c.GetLabels()
	return l[kubetypes.KubernetesPodNamespaceLabel] + "/" + l[kubetypes.KubernetesPodNameLabel] + "/" + l[kubetypes.KubernetesContainerNameLabel]
}

// sample is one container's usage now: memory bytes and cumulative CPU nanoseconds, or ok=false
// if the file has no entry for it. Caller holds mu.
func (b *usageBook) sample(now time.Time, c *runtimeapi.Container) (memory, cpuNanos uint64, ok bool) {
	rate, ok := b.entries[containerKey(c)]
	if !ok {
		return 0, 0, false
	}
	counter, found := b.cpu[c.Id]
	if !found {
		counter = &cpuCounter{at: time.Unix(0, c.CreatedAt), nanos: float64(cpuStartCost)}
		b.cpu[c.Id] = counter
	}
	counter.advance(now)
	counter.nanoCores = rate.nanoCores
	return rate.memory, uint64(counter.nanos), true
}

// running lists the fake runtime's running containers matching filter (nil: all).
func (b *usageBook) running(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	if filter != nil {
		f.Id, f.PodSandboxId, f.LabelSelector = filter.Id, filter.PodSandboxId, filter.LabelSelector
	}
	containers, err := b.runtime.ListContainers(ctx, f)
	sort.Slice(containers, func(i, j int) bool { return containers[i].Id < containers[j].Id })
	return containers, err
}

// containerStats answers the CRI's ListContainerStats: the running containers matching filter
// that have an entry.
func (b *usageBook) containerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	var cf *runtimeapi.ContainerFilter
	if filter != nil {
		cf = &runtimeapi.ContainerFilter{Id: filter.Id, PodSandboxId: filter.PodSandboxId, LabelSelector: filter.LabelSelector}
	}
	containers, err := b.running(ctx, cf)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reload(now)
	b.forget(containers, filter)
	out := make([]*runtimeapi.ContainerStats, 0, len(containers))
	for _, c := range containers {
		memory, cpu, ok := b.sample(now, c)
		if !ok {
			continue
		}
		ts := now.UnixNano()
		out = append(out, &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata, Labels: c.Labels, Annotations: c.Annotations},
			Cpu:        &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu}},
			Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{Value: memory},
				UsageBytes: &runtimeapi.UInt64Value{Value: memory}, RssBytes: &runtimeapi.UInt64Value{Value: memory}},
		})
	}
	return out, nil
}

// forget drops the CPU counters of containers no longer running, on an unfiltered listing.
// Caller holds mu.
func (b *usageBook) forget(running []*runtimeapi.Container, filter *runtimeapi.ContainerStatsFilter) {
	if filter != nil && (filter.Id != "" || filter.PodSandboxId != "" || len(filter.LabelSelector) > 0) {
		return
	}
	alive := make(map[string]bool, len(running))
	for _, c := range running {
		alive[c.Id] = true
	}
	for id := range b.cpu {
		if !alive[id] {
			delete(b.cpu, id)
		}
	}
}

// podUsage is a pod cgroup's usage: the sum over its running containers with an entry, or
// --pod-memory-usage and no CPU when none has one.
func (b *usageBook) podUsage(uid string) (memory, cpuNanos uint64) {
	ctx := context.Background()
	sandboxes, err := b.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{kubetypes.KubernetesPodUIDLabel: uid},
	})
	var containers []*runtimeapi.Container
	for _, s := range sandboxes {
		found, lerr := b.running(ctx, &runtimeapi.ContainerFilter{PodSandboxId: s.Id})
		err = errors.Join(err, lerr)
		containers = append(containers, found...)
	}
	if err != nil {
		klog.ErrorS(err, "Cannot list the pod's containers for its cgroup usage", "podUID", uid)
	}
	memory, cpuNanos, found := b.sum(containers)
	if !found {
		return b.fallbackPodMemory, 0
	}
	return memory, cpuNanos
}

// nodeUsage is the root cgroup's usage: the sum over all running containers with an entry.
func (b *usageBook) nodeUsage() (memory, cpuNanos uint64) {
	containers, err := b.running(context.Background(), nil)
	if err != nil {
		klog.ErrorS(err, "Cannot list containers for the node's usage")
	}
	memory, cpuNanos, _ = b.sum(containers)
	return memory, cpuNanos
}

func (b *usageBook) sum(containers []*runtimeapi.Container) (memory, cpuNanos uint64, found bool) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reload(now)
	for _, c := range containers {
		m, cpu, ok := b.sample(now, c)
		if ok {
			memory, cpuNanos, found = memory+m, cpuNanos+cpu, true
		}
	}
	return memory, cpuNanos, found
}
