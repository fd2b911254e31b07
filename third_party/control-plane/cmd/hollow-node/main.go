// Command hollow-node runs upstream's kubelet (k8s.io/kubernetes/pkg/kubelet, the version pinned
// in this minor's go.mod, third_party/control-plane/v1.N/) for one simulated node, through kubemark's own library
// (k8s.io/kubernetes/pkg/kubemark), against a real API server. All kubelet logic — pod admission,
// resize admission (Deferred/Infeasible), the status manager's conditions and messages, retries,
// the pod workers, graceful deletion, the node status setters, Events — is upstream's, unchanged.
//
// Fakes exist only at the runtime boundary, each replacing one upstream implementation:
//
//   - CRI: kubemark's fake remote runtime (k8s.io/cri-client/pkg/fake RemoteRuntime) over a gRPC
//     socket, as cmd/kubemark/app/hollow_node.go run() does, but with the socket in --work-dir
//     instead of fake.GenerateEndpoint()'s /tmp/kubelet_remote_<n>.sock, and the fake image
//     service (kubemark's --use-host-image-service=false).
//   - cAdvisor: kubemark's pkg/kubelet/cadvisor/testing Fake, with MachineInfo sized by
//     --cores/--memory and ContainerInfoV2 reporting the root and pod cgroups' usage
//     (replacing cadvisorClient.MachineInfo / ContainerInfoV2 in pkg/kubelet/cadvisor/cadvisor_linux.go).
//   - Resource usage: per container, from the usage file (--usage-file, usage.go), reported as the
//     CRI's container stats (cri_stats.go, on the kubelet's side of the CRI) and cAdvisor's pod
//     and root cgroups, so /metrics/resource and the kubelet's own check before lowering a memory
//     limit see the same numbers; a pod with no entry reports --pod-memory-usage for its cgroup.
//   - Container manager: kubemark's cm.NewStubContainerManager() (pkg/kubelet/cm/container_manager_stub.go)
//     with two methods replaced: GetNodeAllocatableReservation (containerManagerImpl's in
//     pkg/kubelet/cm/node_container_manager_linux.go: system-reserved; no eviction thresholds are
//     configured) and NewPodContainerManager, which returns in-memory pod cgroups (replacing
//     podContainerManagerImpl in pkg/kubelet/cm/pod_container_manager_linux.go over cgroup v1
//     files, cgroupV1impl.GetCgroupConfig / cgroupCommon.SetCgroupConfig). The stub's pod cgroup
//     read/write returns "not implemented", so stock kubemark never completes a resize.
//   - Container exit time: the fake runtime stops a container at once; a pod annotated
//     hollow-node.resize-guard.io/stop-after=<duration> has its containers take that long (at most
//     the grace period) to stop, as a process finishing its work after SIGTERM would (stop.go).
//
// Not a fake: the event recorder. kubemark installs record.FakeRecorder, which drops every kubelet
// Event; here the kubelet builds its own (makeEventRecorder in cmd/kubelet/app/server.go) from an
// event client. A real recorder also starts the kubelet's OOM watcher, which reads /dev/kmsg, so
// /dev/kmsg must be readable (checked at start).
//
// Everything the kubelet writes (root dir, checkpoints, pod logs, sockets) lives under --work-dir;
// TMPDIR is pointed there too, so nothing lands in /tmp. By default no port is opened (the kubelet
// server is disabled, as with kubemark's --kubelet-port=0 --kubelet-read-only-port=0);
// --kubelet-port with --node-ip serves the kubelet's HTTPS API there, with webhook authentication
// and authorization against the API server (kubelet_server.go).
package main

import (
	"context"
	goflag "flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/version"
	"k8s.io/component-base/version/verflag"
	fakeremote "k8s.io/cri-client/pkg/fake"
	"k8s.io/klog/v2"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubemark"
	utilflag "k8s.io/kubernetes/pkg/util/flag"
)

type config struct {
	nodeName       string
	kubeconfig     string
	workDir        string
	cores          int
	memory         string
	reservedCPU    string
	reservedMemory string
	podMemoryUsage string
	usageFile      string
	kubeletPort    int
	nodeIP         string
	maxPods        int
	nodeLabels     map[string]string
	taints         []v1.Taint
	featureGates   map[string]bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "hollow-node: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	c := config{nodeLabels: map[string]string{}, featureGates: map[string]bool{}}
	fs := pflag.NewFlagSet("hollow-node", pflag.ContinueOnError)
	fs.StringVar(&c.nodeName, "node-name", "", "Node name (required).")
	fs.StringVar(&c.kubeconfig, "kubeconfig", "", "Kubeconfig of the kubelet's API client (required).")
	fs.StringVar(&c.workDir, "work-dir", "", "Directory for everything the kubelet writes (required; created if missing). Keep it short: unix socket paths under it must stay below 108 bytes.")
	fs.IntVar(&c.cores, "cores", 1, "CPU cores of the fake cAdvisor machine (node capacity cpu).")
	fs.StringVar(&c.memory, "memory", "3840Mi", "Memory of the fake cAdvisor machine (node capacity memory).")
	fs.StringVar(&c.reservedCPU, "reserved-cpu", "0", "CPU reserved for the system (capacity - reserved = allocatable).")
	fs.StringVar(&c.reservedMemory, "reserved-memory", "0", "Memory reserved for the system (capacity - reserved = allocatable).")
	fs.StringVar(&c.podMemoryUsage, "pod-memory-usage", "0", "Memory usage the fake cAdvisor reports for a pod cgroup none of whose containers has a usage-file entry.")
	fs.StringVar(&c.usageFile, "usage-file", "", "JSON file of per-container usage, re-read when it changes: {\"<namespace>/<pod>/<container>\": {\"memory\": \"150Mi\", \"cpu\": \"200m\"}} (default <work-dir>/usage.json).")
	fs.IntVar(&c.kubeletPort, "kubelet-port", 0, "Serve the kubelet's HTTPS API on --node-ip at this port (0: no kubelet server).")
	fs.StringVar(&c.nodeIP, "node-ip", "", "The node's InternalIP, a non-loopback address of this machine (required with --kubelet-port).")
	fs.IntVar(&c.maxPods, "max-pods", 110, "Pod capacity.")
	labels := cliflag.ConfigurationMap(c.nodeLabels)
	fs.Var(&labels, "node-labels", "Extra node labels (key=value,...).")
	fs.Var(utilflag.RegisterWithTaintsVar{Value: &c.taints}, "register-with-taints", "Taints to register the node with (key=value:Effect,...).")
	fs.Var(cliflag.NewMapStringBool(&c.featureGates), "feature-gates", "Kubelet feature gates (Name=true|false,...).")
	verflag.AddFlags(fs)
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == pflag.ErrHelp {
			return nil
		}
		return err
	}
	verflag.PrintAndExitIfRequested()
	if c.nodeName == "" || c.kubeconfig == "" || c.workDir == "" {
		return fmt.Errorf("--node-name, --kubeconfig and --work-dir are required")
	}
	if c.cores < 1 {
		return fmt.Errorf("--cores must be at least 1")
	}
	memory, err := resource.ParseQuantity(c.memory)
	if err != nil {
		return fmt.Errorf("--memory: %w", err)
	}
	usage, err := resource.ParseQuantity(c.podMemoryUsage)
	if err != nil {
		return fmt.Errorf("--pod-memory-usage: %w", err)
	}
	var serving *kubeletServer
	if c.kubeletPort < 0 || c.kubeletPort > 65535 {
		return fmt.Errorf("--kubelet-port %d is not a port", c.kubeletPort)
	}
	if c.nodeIP != "" || c.kubeletPort != 0 {
		if c.kubeletPort == 0 || c.nodeIP == "" {
			return fmt.Errorf("--kubelet-port and --node-ip go together")
		}
		ip, err := parseNodeIP(c.nodeIP)
		if err != nil {
			return err
		}
		serving = &kubeletServer{nodeIP: ip, port: c.kubeletPort}
	}
	reservation := v1.ResourceList{}
	for name, value := range map[v1.ResourceName]string{v1.ResourceCPU: c.reservedCPU, v1.ResourceMemory: c.reservedMemory} {
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return fmt.Errorf("--reserved-%s: %w", name, err)
		}
		if !q.IsZero() {
			reservation[name] = q
		}
	}

	workDir, err := filepath.Abs(c.workDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	// Anything that asks os.TempDir writes under the work dir.
	if err := os.Setenv("TMPDIR", workDir); err != nil {
		return err
	}
	kmsg, err := os.Open("/dev/kmsg")
	if err != nil {
		return fmt.Errorf("the kubelet's OOM watcher (started with a real event recorder) needs /dev/kmsg readable: %w", err)
	}
	_ = kmsg.Close()
	// cmd/kubelet/app/server.go Run applies the configuration's gates the same way; RunKubelet,
	// which kubemark calls, does not.
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(c.featureGates); err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	klog.InfoS("Starting hollow node", "version", version.Get().GitVersion, "node", c.nodeName, "workDir", workDir)

	flags, kc := kubemark.GetHollowKubeletConfig(&kubemark.HollowKubeletOptions{
		NodeName:           c.nodeName,
		MaxPods:            c.maxPods,
		NodeLabels:         c.nodeLabels,
		RegisterWithTaints: c.taints,
	})
	// GetHollowKubeletConfig made its root dir and two subdirectories under a hard-coded /tmp
	// (test/utils.MakeTempDirOrDie): move them into the work dir.
	if !strings.HasPrefix(filepath.Base(flags.RootDirectory), "hollow-kubelet.") {
		return fmt.Errorf("unexpected kubemark root dir %q", flags.RootDirectory)
	}
	if err := os.RemoveAll(flags.RootDirectory); err != nil {
		return err
	}
	flags.RootDirectory = filepath.Join(workDir, "kubelet")
	kc.StaticPodPath = filepath.Join(flags.RootDirectory, "static-pods")
	kc.PodLogsDir = filepath.Join(flags.RootDirectory, "pod-logs")
	for _, dir := range []string{kc.StaticPodPath, kc.PodLogsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	endpoint := "unix://" + filepath.Join(workDir, "cri.sock")
	kc.EnableServer = false // no kubelet HTTPS port (kubemark's --kubelet-port=0) unless serving
	kc.ReadOnlyPort = 0
	if serving != nil {
		if err := serving.configure(flags, kc, c.nodeName); err != nil {
			return err
		}
	}
	kc.ContainerRuntimeEndpoint = endpoint
	kc.ImageServiceEndpoint = endpoint
	kc.FeatureGates = c.featureGates
	kc.SystemReserved = map[string]string{"cpu": c.reservedCPU, "memory": c.reservedMemory}
	// No hard eviction thresholds: they would be added to the reservation by the real container
	// manager; allocatable is capacity - system-reserved exactly.
	kc.EvictionHard = map[string]string{}
	if len(filepath.Join(flags.RootDirectory, "pod-resources", "kubelet.sock")) >= 108 {
		return fmt.Errorf("work dir %s is too long: the kubelet's unix sockets under it would exceed 107 bytes", workDir)
	}

	clientConfig, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", c.kubeconfig, err)
	}
	// The kubelet's clients, as cmd/kubelet/app/server.go buildKubeletClientConfig and
	// cmd/kubemark/app/hollow_node.go make them.
	clientConfig.ContentType = kc.ContentType
	clientConfig.QPS = float32(kc.KubeAPIQPS)
	clientConfig.Burst = int(kc.KubeAPIBurst)
	clientConfig.UserAgent = "hollow-kubelet/" + c.nodeName
	client, err := clientset.NewForConfig(clientConfig)
	if err != nil {
		return err
	}
	heartbeatConfig := restclient.CopyConfig(clientConfig)
	heartbeatConfig.Timeout = kc.NodeStatusUpdateFrequency.Duration
	if lease := time.Duration(kc.NodeLeaseDurationSeconds) * time.Second; heartbeatConfig.Timeout > lease {
		heartbeatConfig.Timeout = lease
	}
	heartbeatConfig.QPS = float32(-1)
	heartbeatClient, err := clientset.NewForConfig(heartbeatConfig)
	if err != nil {
		return err
	}
	eventConfig := restclient.CopyConfig(clientConfig)
	eventConfig.QPS = float32(kc.EventRecordQPS)
	eventConfig.Burst = int(kc.EventBurst)
	eventClient, err := clientset.NewForConfig(eventConfig)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	runtime := fakeremote.NewFakeRemoteRuntime()
	if err := runtime.Start(endpoint); err != nil {
		return fmt.Errorf("fake CRI runtime: %w", err)
	}
	defer runtime.Stop()
	runtimeService, err := newRuntimeService(ctx, endpoint)
	if err != nil {
		return fmt.Errorf("CRI runtime service: %w", err)
	}

	usageFile := c.usageFile
	if usageFile == "" {
		usageFile = filepath.Join(workDir, "usage.json")
	}
	cgroups := &podCgroups{byName: map[string]*podCgroup{}, usage: newUsageBook(usageFile, uint64(usage.Value()), runtime.RuntimeService)}
	machine := newMachine(c.nodeName, c.cores, uint64(memory.Value()), cgroups)
	containerManager := &containerManager{
		ContainerManager: cm.NewStubContainerManager(),
		capacity: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(int64(c.cores)*1000, resource.DecimalSI),
			v1.ResourceMemory: memory,
		},
		reservation: reservation,
		pods:        &podContainerManager{cgroups: cgroups, cpuPeriod: uint64(kc.CPUCFSQuotaPeriod.Duration / time.Microsecond), enforceCPULimits: kc.CPUCFSQuota},
	}

	hollow := kubemark.NewHollowKubelet(flags, kc, client, heartbeatClient, machine, runtime.ImageService, slowStop{usageStats{runtimeService, cgroups.usage}}, containerManager)
	// The kubelet's own recorder instead of kubemark's record.FakeRecorder.
	hollow.KubeletDeps.Recorder = nil
	hollow.KubeletDeps.EventClient = eventClient.CoreV1()
	if serving != nil {
		if err := serving.dependencies(ctx, hollow, client, c.nodeName); err != nil {
			return err
		}
	}
	// kubemark.HollowKubelet.Run, minus its klog.Fatalf and endless select.
	if err := kubeletapp.RunKubelet(ctx, &options.KubeletServer{
		KubeletFlags:         *hollow.KubeletFlags,
		KubeletConfiguration: *hollow.KubeletConfiguration,
	}, hollow.KubeletDeps); err != nil {
		return fmt.Errorf("kubelet: %w", err)
	}
	<-ctx.Done()
	klog.InfoS("Stopping hollow node", "node", c.nodeName)
	return nil
}
