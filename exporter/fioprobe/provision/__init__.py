"""The provisioning probe's computation: what Kubernetes objects say, in the order the probe's
watches deliver them, turned into timed steps from claim to first fdatasync and back, and
into one failure reason of a closed set (docs/PROVISIONING.md).

Pure: no I/O and no clock. The caller reads the clock when a watch delivers a change and
passes it in, so every rule here is tested on sequences of deliveries, not on a cluster. Beside
kube/ (which reads the API) and importing nothing of it: the stage that will run a probe
needs both, and sits above them.
"""
