// Package resize runs Kubernetes' own in-place pod resize e2e specs, unmodified, against the
// cluster --kubeconfig names: test/e2e/common/node/pod_resize.go and test/e2e/node/pod_resize.go
// of k8s.io/kubernetes (the version go.mod pins), registered by blank-importing their packages.
//
// The flags and the ginkgo run are set up as upstream's test/e2e/e2e_test.go (TestMain) and
// test/e2e/e2e.go (RunE2ETests) do, without the rest of upstream's suite: no cluster-wide
// setupSuite (it waits for kube-system pods and DaemonSets this cluster does not run), so the
// specs start from the cluster as the runner (tests/e2e/upstream/resize_specs.rs) leaves it.
package resize

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"k8s.io/component-base/logs"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/test/e2e/framework"
	"k8s.io/kubernetes/test/e2e/framework/config"

	// The specs: the container resize matrix, invalid patches, memory below usage (common/node);
	// ResourceQuota, LimitRanger, scheduler-focused and deferred resizes (node). Each package
	// registers every spec of its files; the runner picks the resize ones with --ginkgo.focus.
	_ "k8s.io/kubernetes/test/e2e/common/node"
	_ "k8s.io/kubernetes/test/e2e/node"

	// As upstream's e2e_test.go: debug dumps on failure, metrics grabbing, and the check that
	// every node is still Ready after each spec.
	_ "k8s.io/kubernetes/test/e2e/framework/debug/init"
	_ "k8s.io/kubernetes/test/e2e/framework/metrics/init"
	_ "k8s.io/kubernetes/test/e2e/framework/node/init"
)

func TestMain(m *testing.M) {
	var versionFlag bool
	flag.CommandLine.BoolVar(&versionFlag, "version", false, "Displays version information.")
	config.CopyFlags(config.Flags, flag.CommandLine)
	framework.RegisterCommonFlags(flag.CommandLine)
	framework.RegisterClusterFlags(flag.CommandLine)
	flag.Parse()
	if versionFlag {
		fmt.Printf("%s\n", version.Get())
		os.Exit(0)
	}
	if flag.CommandLine.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unknown additional command line arguments: %s\n", flag.CommandLine.Args())
		os.Exit(1)
	}
	framework.AfterReadingAllFlags(&framework.TestContext)
	os.Exit(m.Run())
}

// TestResize runs the registered specs through ginkgo as upstream's RunE2ETests does.
func TestResize(t *testing.T) {
	logs.InitLogs()
	defer logs.FlushLogs()
	klog.EnableContextualLogging(true)
	gomega.RegisterFailHandler(framework.Fail)
	suiteConfig, reporterConfig := framework.CreateGinkgoConfig()
	ginkgo.RunSpecs(t, "Kubernetes in-place resize e2e specs", suiteConfig, reporterConfig)
}
