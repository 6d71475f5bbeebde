// Which StorageClasses the provisioning probe provisions (components/provisioning.libsonnet),
// for it and for the Pushgateway's NetworkPolicy, which lets its pod push.
{
  // The class of each storageClasses entry with `provision` on (the class of its PVC), each
  // once, then provisioning.storageClasses; [] when the probe is off.
  classes(c)::
    if !c.provisioning.enabled then []
    else
      local own = std.foldl(
        function(names, sc)
          local n = std.get(sc, 'storageClassName', sc.name);
          if !sc.provision || std.member(names, n) then names else names + [n],
        c.storageClasses,
        [],
      );
      own + [n for n in c.provisioning.storageClasses if !std.member(own, n)],

  // The nodes a class runs on, a run each (provisioning.nodes); [] for a class that runs once,
  // where the scheduler places it.
  nodesOf(c, name)::
    local listed = std.get(c.provisioning.nodes, name, null);
    if listed == null then [] else listed,

  // The groups the probe pushes, for the mixin's expected inventory: a class's, or one per
  // node of a class given nodes.
  groups(c):: std.flattenArrays([
    local nodes = $.nodesOf(c, n);
    if nodes == [] then [{ storageclass: n }] else [{ storageclass: n, node: x } for x in nodes]
    for n in $.classes(c)
  ]),

  // How many runs, one after the other, the Job makes at most: each class's run alone, a
  // class given nodes in rounds of maxParallel (the command's --max-parallel).
  rounds(c):: std.foldl(
    function(sum, n) sum + std.max(1, std.ceil(std.length($.nodesOf(c, n)) / c.provisioning.maxParallel)),
    $.classes(c),
    0,
  ),
}
