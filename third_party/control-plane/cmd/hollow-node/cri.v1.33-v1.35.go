package main

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
	"k8s.io/klog/v2"
)

// newRuntimeService connects to the fake CRI runtime as v1.33–v1.35's kubemark does
// (cmd/kubemark/app/hollow_node.go: remote.NewRemoteRuntimeService with a logger).
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	logger := klog.FromContext(ctx)
	return remote.NewRemoteRuntimeService(endpoint, 15*time.Second, noop.NewTracerProvider(), &logger)
}
