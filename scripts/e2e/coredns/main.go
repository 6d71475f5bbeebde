// A minimal CoreDNS for the end-to-end cluster: only the plugins the cluster's Corefile uses.
// Without `forward` (and without any other resolver plugin), no query can leave the machine.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

// The order in which a query passes the plugins: the same relative order as CoreDNS's own
// plugin.cfg, restricted to the plugins above.
var directives = []string{
	"reload", "ready", "health", "errors", "log", "loadbalance", "cache", "kubernetes", "loop",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
