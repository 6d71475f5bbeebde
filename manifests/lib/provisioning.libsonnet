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
}
