// All fioprobe alert groups and the recording rules they share.
(import 'recording.libsonnet')
+ (import 'etcd.libsonnet')
+ (import 'burst.libsonnet')
+ (import 'regression.libsonnet')
+ (import 'probe-health.libsonnet')
