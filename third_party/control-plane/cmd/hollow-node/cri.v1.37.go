package main

import (
	"context"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	remote "k8s.io/cri-client/pkg"
)

// newRuntimeService connects to the fake CRI runtime as v1.37's kubemark does
// (cmd/kubemark/app/hollow_node.go: remote.NewRemoteRuntimeServiceBuilder).
func newRuntimeService(ctx context.Context, endpoint string) (internalapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().
		WithEndpoint(endpoint).
		WithConnectionTimeout(15 * time.Second).
		Build(ctx)
}
