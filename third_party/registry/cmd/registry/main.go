// The CNCF distribution registry's own command (github.com/distribution/distribution/v3's
// cmd/registry/main.go, whose body this is), with the storage drivers the tests use: filesystem
// and inmemory. The cloud ones (azure, gcs, s3-aws, the cloudfront middleware) are left out, and
// with them the cloud SDKs, about half of what a cold build compiles; the registry's serving code
// (handlers, auth, storage) is the module's, unmodified.
package main

import (
	_ "net/http/pprof"

	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/auth/silly"
	_ "github.com/distribution/distribution/v3/registry/auth/token"
	_ "github.com/distribution/distribution/v3/registry/proxy"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/redirect"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/middleware/rewrite"
)

func main() {
	// As upstream: the two commands registered with RootCmd exit non-zero themselves on failure.
	registry.RootCmd.Execute() //nolint:errcheck
}
