package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubemark"
)

// kubeletServer is the kubelet's HTTPS API (--kubelet-port): /metrics/resource, /stats, /pods,
// … on nodeIP:port, which the Node's status then advertises (status.addresses InternalIP,
// status.daemonEndpoints.kubeletEndpoint.port) for metrics-server and the API server's proxy.
type kubeletServer struct {
	nodeIP net.IP
	port   int
}

// configure sets what cmd/kubelet/app/server.go run() would take from the kubelet's flags and
// configuration file: the node IP, the server's address and port, and authentication and
// authorization by webhook (TokenReview and SubjectAccessReview against the API server, as
// kubeadm configures a kubelet), replacing kubemark's no-port, no-auth settings and
// options.NewKubeletConfiguration's legacy defaults (anonymous, AlwaysAllow). The serving
// certificate is self-signed, as InitializeTLS in that file makes one when none is configured,
// but for the node IP as well as the node name.
func (s kubeletServer) configure(flags *options.KubeletFlags, kc *kubeletconfig.KubeletConfiguration, nodeName string) error {
	flags.NodeIP = s.nodeIP.String()
	kc.EnableServer = true
	kc.Address = s.nodeIP.String()
	kc.Port = int32(s.port)
	kc.ReadOnlyPort = 0
	kc.Authentication.Anonymous.Enabled = false
	kc.Authentication.Webhook.Enabled = true
	kc.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeWebhook

	flags.CertDirectory = filepath.Join(flags.RootDirectory, "pki")
	kc.TLSCertFile = filepath.Join(flags.CertDirectory, "kubelet.crt")
	kc.TLSPrivateKeyFile = filepath.Join(flags.CertDirectory, "kubelet.key")
	if err := os.MkdirAll(flags.CertDirectory, 0o700); err != nil {
		return err
	}
	cert, key, err := certutil.GenerateSelfSignedCertKey(nodeName, []net.IP{s.nodeIP}, nil)
	if err != nil {
		return fmt.Errorf("kubelet serving certificate: %w", err)
	}
	if err := certutil.WriteCert(kc.TLSCertFile, cert); err != nil {
		return err
	}
	return keyutil.WriteKey(kc.TLSPrivateKeyFile, key)
}

// dependencies sets the kubelet dependencies cmd/kubelet/app/server.go run() builds and
// kubemark leaves empty: TLS options (InitializeTLS, tls.v1.*.go) and
// the authenticator/authorizer (BuildAuth in cmd/kubelet/app/auth.go); without Auth the server
// would serve every request unauthenticated.
func (s kubeletServer) dependencies(ctx context.Context, hollow *kubemark.HollowKubelet, client clientset.Interface, nodeName string) error {
	kc := hollow.KubeletConfiguration
	// InitializeTLS keeps the certificate configure wrote; its TLSOptions differ between minors
	// (v1.34–v1.35 carry a tls.Config NewMainKubelet fills in, v1.37 builds its own).
	tlsOptions, err := initializeTLS(ctx, hollow.KubeletFlags, kc)
	if err != nil {
		return fmt.Errorf("kubelet TLS: %w", err)
	}
	hollow.KubeletDeps.TLSOptions = tlsOptions
	auth, runAuthenticatorCAReload, err := kubeletapp.BuildAuth(types.NodeName(nodeName), client, *kc)
	if err != nil {
		return fmt.Errorf("kubelet authentication/authorization: %w", err)
	}
	hollow.KubeletDeps.Auth = auth
	runAuthenticatorCAReload(ctx.Done())
	return nil
}

// parseNodeIP checks --node-ip: an IPv4 or IPv6 address that is not loopback (the kubelet refuses
// one, pkg/kubelet/kubelet_node_status.go validateNodeIP).
func parseNodeIP(raw string) (net.IP, error) {
	ip := net.ParseIP(raw)
	if ip == nil {
		return nil, fmt.Errorf("--node-ip %q is not an IP address", raw)
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return nil, fmt.Errorf("--node-ip %s: the kubelet needs a non-loopback address of this machine", raw)
	}
	return ip, nil
}
