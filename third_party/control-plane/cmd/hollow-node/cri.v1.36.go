package main

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace/noop"
	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// newRuntimeService connects to the fake CRI runtime as v1.36's kubemark does
// (cmd/kubemark/app/hollow_node.go: remote.NewRemoteRuntimeService with a context, no streaming).
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeService(ctx, endpoint, 15*time.Second, noop.NewTracerProvider(), false)
}
