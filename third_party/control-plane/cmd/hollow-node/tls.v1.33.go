package main

import (
	"context"

	kubeletapp "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/server"
)

// initializeTLS calls v1.33's cmd/kubelet/app InitializeTLS, which takes no context.
func initializeTLS(_ context.Context, flags *options.KubeletFlags, kc *kubeletconfig.KubeletConfiguration) (*server.TLSOptions, error) {
	return kubeletapp.InitializeTLS(flags, kc)
}
