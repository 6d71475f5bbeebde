// The pod sandbox ("pause") image of the end-to-end cluster: holds the pod's namespaces and
// waits for a termination signal. Built static (CGO_ENABLED=0) so the image is the binary
// alone; no registry is reachable, so the kubelet's default pause image cannot be pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	// Reap children re-parented to this process (PID 1 of the sandbox) so none stays a zombie.
	signal.Notify(signals, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
