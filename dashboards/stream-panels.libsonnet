// The continuous stream's panels, for the Overview (per StorageClass) and the etcd disks
// dashboard (per node) (part of common.libsonnet).
local u = import '../lib/util.libsonnet';
local g = import 'g.libsonnet';

function(c) {
  local d = c.dashboards,

  // --- The continuous stream (Overview per StorageClass, etcd disks per node) -------------
  // `fioprobe continuous` is scraped, not pushed: besides storageclass, node and the cluster,
  // its series carry the scrape's pod, instance, job and namespace, which every query
  // aggregates away and none selects on (a replaced pod's series simply sum with its
  // successor's). One stream per target: storageclass and node identify it, like a volume.
  //   matchers: which streams (the dashboard's variables);
  //   etcdOnly: keep the streams of disks that hold etcd (probe:fioprobe_etcd_disk:info,
  //             the deployment's own statement, never a label shape);
  //   legend:   how a line names its stream;
  //   what:     the selection in words, for descriptions.
  stream(matchers, etcdOnly, legend, what):: {
    local k = $,
    local by = k.volumeBy,
    local sel = k.raw(matchers),
    local window = d.continuousWindow,
    local etcdDisks = '%s%s' % [u.etcdDiskRecord, k.rec()],
    // Appended to an expression with the stream's labels: only the etcd disks' streams.
    local onEtcd(expr) =
      if etcdOnly then '%s and on (%s) %s' % [expr, by, etcdDisks] else expr,
    local etcdText =
      if etcdOnly then
        ' Only the streams of disks that hold etcd (their configuration says so: '
        + '%s).' % u.etcdDiskRecord
      else '',

    p99Title:: 'Stream fdatasync p99' + (if etcdOnly then ', probe and etcd' else ' and probe'),

    local bucket = 'fioprobe_continuous_sync_latency_seconds_bucket',
    p99Expr::
      'histogram_quantile(0.99, sum by (%s, le) (%s))'
      % [by, onEtcd('rate(%s%s[%s])' % [bucket, sel, window])],
    p99Text::
      "The continuous stream's fdatasync p99 per stream %s (solid): a histogram estimate " % what
      + "over the stream's last %s (histogram_quantile over the rate of " % window
      + 'fioprobe_continuous_sync_latency_seconds, all pods of a stream summed), about one '
      + 'fdatasync a second around the clock, so it sees the stalls that fall between the '
      + 'scheduled runs; exact at bucket boundaries (5, 10 and 20 ms are ones), otherwise '
      + 'only known to lie in that bucket.',

    // The scheduled probe's p99 on the same axis: fio's exact p99 of its most recent run.
    lastRunTarget(lastRunMatchers, lastRunLegend)::
      k.target(
        onEtcd(
          'max by (%s, profile) (%s%s)'
          % [by, u.lastRunRecord('sync'), k.rec(lastRunMatchers)]
        ),
        'probe last run ' + lastRunLegend
      ),
    probeLastRunText(estimatePanel)::
      " Dashed: the scheduled probe's fsync p99, fio's exact percentile of each probe's most "
      + 'recent run (%s), held until the next run pushes. ' % u.lastRunRecord('sync')
      + 'It and the stream measure the same pattern at different times: the probe a few '
      + 'seconds every few minutes, the stream all the time, so they differ when the disk '
      + 'stalls between runs. "%s" shows the probe\'s own histogram estimate over ' % estimatePanel
      + "%s; it differs from the last run's exact value too." % k.latencyWindowText,

    // The stream's latency histogram, one heatmap per value of `repeat` (a multi-value
    // variable `repeatMatcher` selects on).
    heatmap(repeat, repeatMatcher=null)::
      k.latencyHeatmap(
        'Stream fdatasync latency distribution: $%s' % repeat,
        'fdatasyncs per second of the continuous stream in each latency bucket (the rate of '
        + 'the histogram fioprobe_continuous_sync_latency_seconds over $__rate_interval, all '
        + 'pods summed), one heatmap per %s, %s summed. ' % [repeat, what]
        + 'About one fdatasync a second: a column spread upwards is a slow spell, cells above '
        + "10 ms are fdatasyncs etcd's guidance says should not happen. The buckets include "
        + "5, 10 and 20 ms and all of etcd's own. A hang shows only when the fdatasync ends: "
        + 'see the in-flight panel.' + etcdText,
        k.target(
          'sum by (le) (%s)'
          % onEtcd('rate(%s%s[$__rate_interval])' % [
            bucket,
            k.raw(matchers + (if repeatMatcher == null then [] else [repeatMatcher])),
          ]),
          '{{le}}'
        ),
        repeat,
        cellUnit='ops',
        unit='ops',
      ),

    inflight(w=12)::
      local ts = g.panel.timeSeries;
      k.timeSeries(
        'Stream in-flight age',
        "Age of each stream's oldest operation (write + fdatasync) still outstanding "
        + '(fioprobe_continuous_inflight_seconds, computed at scrape time; the highest in each '
        + "point's $__rate_interval, so a spell between two points is not missed), %s. " % what
        + 'Zero while nothing is outstanding. A hang shows here while it hangs, long before '
        + 'any histogram sees it. Dashed lines: %s s, as much as the stall warning counts '
          % u.num(c.continuousStallSeconds)
        + 'in its %s, and %s s, where a hang on an etcd disk pages (on other volumes a hang '
          % [c.continuousStallWindow, u.num(c.continuousHangCriticalSeconds)]
        + 'warns from %s s).' % u.num(c.continuousStorageClassHangWarningSeconds)
        + etcdText,
        's',
        k.target(
          onEtcd(
            'max by (%s) (max_over_time(fioprobe_continuous_inflight_seconds%s[$__rate_interval]))'
            % [by, sel]
          ),
          legend
        ),
        w=w,
      )
      + ts.standardOptions.withMin(0)
      // The hang line stays in view while the age is near zero, which it is nearly always.
      + ts.fieldConfig.defaults.custom.withAxisSoftMax(c.continuousHangCriticalSeconds)
      + ts.standardOptions.thresholds.withMode('absolute')
      + ts.standardOptions.thresholds.withSteps([
        { color: 'green', value: null },
        { color: 'yellow', value: c.continuousStallSeconds },
        { color: 'red', value: c.continuousHangCriticalSeconds },
      ])
      + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed'),

    // The stall warning's amount per minute: continuousStallSeconds within its window.
    local stallLine = c.continuousStallSeconds * 60 / u.seconds(c.continuousStallWindow),
    stall(w=12)::
      local ts = g.panel.timeSeries;
      k.timeSeries(
        'Stream stall seconds per minute',
        'Seconds per minute that an operation of the stream was outstanding beyond its stall '
        + 'threshold (the rate of fioprobe_continuous_stall_seconds_total over '
        + "$__rate_interval, times 60; the threshold is the stream's --stall-threshold, 10 ms "
        + 'by default), %s. 0 on a healthy disk; 60 means stalled the whole minute. ' % what
        + 'Dashed line: %s s per minute, the stall warning on etcd disks (%s s within %s); '
          % [u.num(stallLine), u.num(c.continuousStallSeconds), c.continuousStallWindow]
        + 'the average over a $__rate_interval longer than that reads lower.'
        + etcdText,
        's',
        k.target(
          onEtcd(
            'sum by (%s) (rate(fioprobe_continuous_stall_seconds_total%s[$__rate_interval])) * 60'
            % [by, sel]
          ),
          legend
        ),
        w=w,
      )
      + ts.standardOptions.withMin(0)
      + ts.standardOptions.thresholds.withMode('absolute')
      + ts.standardOptions.thresholds.withSteps([
        { color: 'green', value: null },
        { color: 'yellow', value: stallLine },
      ])
      + ts.fieldConfig.defaults.custom.thresholdsStyle.withMode('dashed'),

    // node_exporter's view of the same device. Its series name the host by a configured
    // label and the device by kernel name; both are copied into the names the stream's info
    // uses (label_join copies a label without a regex, so no `$1` reaches Grafana), and
    // joined on (cluster, ran_on_node, <disk>): ran_on_node is where the stream's pod runs,
    // so a StorageClass stream (no node label) finds the node its volume is attached to.
    local diskLabel = d.nodeExporterDiskLabel,
    local joinBy = std.join(', ', [c.clusterLabel, 'ran_on_node', diskLabel]),
    local nodeExporter(expr) =
      'max by (%s) (label_join(label_join(%s, "ran_on_node", "", "%s"), "%s", "", "device"))'
      % [joinBy, expr, d.nodeExporterHostLabel, diskLabel],
    local neSel = k.ext(d.nodeExporterSelector),
    local streamDisks =
      'group by (%s, ran_on_node, %s) (%s)'
      % [by, diskLabel, onEtcd('fioprobe_continuous_info%s' % k.raw(matchers + ['%s!=""' % diskLabel]))],
    local joined(expr) =
      '%s * on (%s) group_right () %s' % [nodeExporter(expr), joinBy, streamDisks],
    local joinText =
      " node_exporter's figures for the block device the stream's file lands on, "
      + "joined through fioprobe_continuous_info's %s label and the node its pod runs on " % diskLabel
      + "(ran_on_node) with node_exporter's device and %s labels " % d.nodeExporterHostLabel
      + '(dashboards.nodeExporterDiskLabel, nodeExporterHostLabel, nodeExporterSelector). The '
      + 'whole device: every writer on it, not only the stream. Empty where node_exporter is '
      + 'not scraped or the stream has no block device (tmpfs, FUSE).' + etcdText,
    local neLegend = legend + ' {{%s}}' % diskLabel,

    writeAwait(w=12)::
      k.timeSeries(
        'Device write await (node_exporter)',
        'Average time a write request to the device took, queue included: '
        + 'rate(node_disk_write_time_seconds_total) / rate(node_disk_writes_completed_total) '
        + 'over $__rate_interval,' + joinText + ' High await with a slow stream: the device '
        + 'is slow or saturated; a slow stream with low await: the time goes above the device '
        + '(filesystem journal, network storage client).',
        's',
        k.target(
          joined(
            'rate(node_disk_write_time_seconds_total%s[$__rate_interval]) ' % neSel
            + '/ rate(node_disk_writes_completed_total%s[$__rate_interval])' % neSel
          ),
          neLegend
        ),
        w=w,
      )
      + g.panel.timeSeries.standardOptions.withMin(0),

    utilisation(w=12)::
      k.fractionTimeSeries(
        'Device utilisation (node_exporter)',
        'Share of time the device had requests outstanding: '
        + 'rate(node_disk_io_time_seconds_total) over $__rate_interval, 0 to 100 %,' + joinText
        + ' Near 100 % the device is busy all the time (for SSDs and network volumes, which '
        + 'serve many requests at once, not necessarily saturated).',
        'percentunit',
        k.target(
          joined('rate(node_disk_io_time_seconds_total%s[$__rate_interval])' % neSel),
          neLegend
        ),
        w=w,
      ),

    // --- Health and cost (Overview) ---
    failing(w=4, h=8)::
      k.stat(
        'Failing streams',
        'Number of streams whose last operation failed (fioprobe_continuous_success == 0), %s, now. ' % what
        + '"Stream errors per hour by reason" says why.',
        'none',
        k.instant('count(fioprobe_continuous_success%s == 0) or vector(0)' % sel),
        [{ color: 'green', value: null }, { color: 'red', value: 1 }],
        w=w,
        h=h,
      ),

    failingFor(w=10)::
      k.timeSeries(
        'Streams failing for',
        'How long each stream has been failing: seconds since its first failed operation or '
        + 'set-up after its last success (fioprobe_continuous_failing_seconds), with the reason '
        + 'of its latest failure, %s; no line while it succeeds. unsafe_target is a ' % what
        + 'directory the stream refuses (planted or foreign), io_error the disk itself: the '
        + 'fixes differ. FioProbeContinuousFailing fires once it passes %s (critical on etcd '
          % c.continuousFailingAfter
        + 'disks).' + etcdText,
        's',
        k.target(
          onEtcd('max by (%s, reason) (fioprobe_continuous_failing_seconds%s > 0)' % [by, sel]),
          legend + ' {{reason}}'
        ),
        w=w,
      ),

    errors(w=10)::
      k.timeSeries(
        'Stream errors per hour by reason',
        'Failed operations and set-ups of each stream in the hour before each point, by reason '
        + '(increase of fioprobe_continuous_errors_total over 1h; reasons: io_error, no_space, '
        + 'read_only, no_directory, unsafe_target, interrupted), %s. ' % what
        + 'Empty while no stream has ever failed (a reason has a series from its first error).',
        'short',
        k.target(
          'sum by (%s, reason) (increase(fioprobe_continuous_errors_total%s[1h]))' % [by, sel],
          legend + ' {{reason}}'
        ),
        w=w,
      ),

    info(w=24, h=6)::
      k.table(
        'Streams: targets and devices',
        'fioprobe_continuous_info of each stream: whether its disk holds etcd (its '
        + 'configuration), the node its pod runs on, the volume type, the block device its '
        + 'file lands on (kernel name, whole disk, major:minor; empty on tmpfs or FUSE, where '
        + "node_exporter's panels stay empty) and the fioprobe version.",
        'none',
        k.tableTarget(
          'max by (%s, etcd_disk, ran_on_node, volume_type, device, disk, major_minor, version) '
          % by + '(fioprobe_continuous_info%s)' % sel
        ),
        [k.organize()],
        w=w,
        h=h,
      ),

    operations(w=12)::
      k.timeSeries(
        'Stream operations per second',
        'Completed operations (write + fdatasync) per second of each stream (the rate of '
        + 'fioprobe_continuous_operations_total over $__rate_interval), %s: ' % what
        + 'about one per --interval (1 s by default); fewer while the disk stalls.',
        'ops',
        k.target(
          'sum by (%s) (rate(fioprobe_continuous_operations_total%s[$__rate_interval]))'
          % [by, sel],
          legend
        ),
        w=w,
      ),

    written(w=12)::
      k.timeSeries(
        'Stream writes per day',
        'Bytes each stream wrote over the %s before each point (increase of ' % d.costWindow
        + 'fioprobe_continuous_written_bytes_total), %s: its cost to the disk it watches, ' % what
        + 'at the application (--write-size per operation; the filesystem adds its metadata). '
        + 'On disk it keeps one file of --file-size.',
        'bytes',
        k.target(
          'sum by (%s) (increase(fioprobe_continuous_written_bytes_total%s[%s]))'
          % [by, sel, d.costWindow],
          legend
        ),
        w=w,
      ),
  },
}
