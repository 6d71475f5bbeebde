// Mixin fragment: fioprobe's Grafana dashboards. mixin.libsonnet adds it with
// `+ (import 'dashboards/dashboards.libsonnet')`; everything is read from $._config
// (config.libsonnet), plus the dashboard-only defaults below.
{
  _config+:: {
    dashboards+: {
      // Stable uids: links and bookmarks to the dashboards survive re-imports.
      uids: {
        overview: 'fioprobe-overview',
        comparison: 'fioprobe-comparison',
        etcd: 'fioprobe-etcd-disks',
      },
      tags: ['fioprobe', 'storage'],
      // Tag the dashboard links select: every dashboard carrying it appears in each one's
      // "fioprobe" dropdown.
      linkTag: 'fioprobe',
      // false hides the cluster variable (single-cluster setups, where it is empty anyway).
      showClusterVariable: true,
      timezone: 'utc',
      refresh: '1m',
      timeFrom: 'now-24h',
      // The benchmark tables' colours: yellow from 5 ms, red from 10 ms (etcd's fsync p99
      // requirement, the same number as the etcd alert's warning threshold).
      latencyYellowSeconds: 0.005,
      latencyRedSeconds: $._config.etcdFsyncP99WarningSeconds,
      // Probes push every few minutes; a Pushgateway series keeps its value in between, so
      // lines need no gap-bridging, but a missing push should show as a gap after an hour.
      spanNulls: 3600000,
      // Heatmap cells at least one probe interval wide: narrower ones would mostly fall
      // between two runs and be empty. Derived from the schedule (probeIntervalSeconds).
      heatmapMinInterval: $._config.windows.interval,
      // Window of the probe-cost panels (bytes per day).
      costWindow: '1d',
      // Comparison dashboard: rate windows offered for its histogram quantiles (the first
      // is the default, the recording rules' window), and how far back B may be shifted.
      comparisonWindows: [$._config.windows.latency, '1h', '6h', '1d', '7d'],
      comparisonShifts: [
        // PromQL has no `offset 0`; 1ms stands for "now".
        { key: 'now', value: '1ms' },
        { key: '1 day ago', value: '1d' },
        { key: '1 week ago', value: $._config.regressionOffset },
      ],
      // etcd's own WAL fsync histogram: extra matchers (e.g. 'job="etcd"'; empty: every
      // etcd_disk_wal_fsync_duration_seconds series of the cluster) and the label that
      // names an etcd member in its legend. These are etcd's series, scraped by the
      // platform's Prometheus, not fioprobe's pushed ones.
      etcdSelector: '',
      etcdMemberLabel: 'instance',
      // CloudWatch BurstBalance from yet-another-cloudwatch-exporter (optional, shown when
      // present; nothing depends on it): extra matchers and the label naming the volume.
      burstBalanceSelector: '',
      burstBalanceVolumeLabel: 'dimension_VolumeId',
    },
  },

  grafanaDashboards+:: {
    'fioprobe-overview.json': (import 'overview.libsonnet')($._config),
    'fioprobe-comparison.json': (import 'comparison.libsonnet')($._config),
    'fioprobe-etcd-disks.json': (import 'etcd.libsonnet')($._config),
  },
}
