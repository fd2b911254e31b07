package main

import (
	"context"

	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/server"
)

// initializeTLS calls cmd/kubelet/app InitializeTLS, which takes a context since v1.34.
func initializeTLS(ctx context.Context, flags *options.KubeletFlags, kc *kubeletconfig.KubeletConfiguration) (*server.TLSOptions, error) {
	return kubeletapp.InitializeTLS(ctx, flags, kc)
}
