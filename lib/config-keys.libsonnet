// The mixin configuration's keys, checked: every key of a _config that the defaults
// (config.libsonnet) do not define, and every unknown key of its nested records (dashboards)
// and of its volume-type tables (and their steps), each a message naming its path and the nearest known key.
// mixin.libsonnet applies it; a separate file so that config.libsonnet never imports itself.
local u = import 'util.libsonnet';
local volumeTypes = (import 'volume-types.json').volumeTypes;

function(c, defaults)
  u.unknownKeys('', c, std.objectFieldsAll(defaults))
  + (if std.objectHasAll(c, 'dashboards') && std.isObject(c.dashboards) then
       u.unknownKeys('dashboards.', c.dashboards, std.objectFieldsAll(defaults.dashboards))
       // and one level further, where a dashboards key is itself a record (uids)
       + std.flattenArrays([
         u.unknownKeys('dashboards.%s.' % k, c.dashboards[k], std.objectFieldsAll(defaults.dashboards[k]))
         for k in std.objectFieldsAll(c.dashboards)
         if std.objectHasAll(defaults.dashboards, k) && std.isObject(defaults.dashboards[k])
            && std.isObject(c.dashboards[k])
       ])
     else [])
  + (if std.objectHasAll(c, 'storageClassFsyncP99WarningSeconds')
        && std.isObject(c.storageClassFsyncP99WarningSeconds) then
       u.unknownKeys('storageClassFsyncP99WarningSeconds.', c.storageClassFsyncP99WarningSeconds, volumeTypes)
     else [])
  + (if std.objectHasAll(c, 'provisionStepWarningSeconds') && std.isObject(c.provisionStepWarningSeconds) then
       local table = c.provisionStepWarningSeconds;
       u.unknownKeys('provisionStepWarningSeconds.', table, ['default'] + volumeTypes)
       // and each type's steps
       + std.flattenArrays([
         u.unknownKeys('provisionStepWarningSeconds.%s.' % t, table[t], u.provisionSteps)
         for t in std.objectFields(table)
         if std.isObject(table[t])
       ])
     else [])
