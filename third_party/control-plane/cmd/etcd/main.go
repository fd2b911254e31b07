// Command etcd is the stock etcd server, built from the go.etcd.io/etcd/server/v3
// version that k8s.io/kubernetes itself selects, so the E2E tests need no
// downloaded etcd release.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
