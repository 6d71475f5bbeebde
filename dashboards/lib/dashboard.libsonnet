// grafonnet's dashboard and dashboard.variable.
local util = import 'util.libsonnet';

local asArray(v) = if std.isArray(v) then v else [v];

{
  new(title):: {
    title: title,
    // Grafana 11.x's dashboard schema version; newer Grafanas migrate it on load, older
    // ones (10.x in many kube-prometheus and OpenShift installs) still read everything used.
    schemaVersion: 39,
    editable: false,
    time: { from: 'now-6h', to: 'now' },
    timezone: 'utc',
    annotations: {
      list: [{
        builtIn: 1,
        datasource: { type: 'grafana', uid: '-- Grafana --' },
        enable: true,
        hide: true,
        iconColor: 'rgba(0, 211, 255, 1)',
        name: 'Annotations & Alerts',
        type: 'dashboard',
      }],
    },
    templating: { list: [] },
    panels: [],
  },
  withUid(value):: { uid: value },
  withTitle(value):: { title: value },
  withDescription(value):: { description: value },
  withTags(value):: { tags: asArray(value) },
  withTimezone(value):: { timezone: value },
  withRefresh(value):: { refresh: value },
  withEditable(value=true):: { editable: value },
  time: {
    withFrom(value):: { time+: { from: value } },
    withTo(value):: { time+: { to: value } },
  },
  graphTooltip: {
    withSharedCrosshair():: { graphTooltip: 1 },
    withSharedTooltip():: { graphTooltip: 2 },
  },
  withVariables(value):: { templating+: { list: asArray(value) } },
  withLinks(value):: { links: asArray(value) },
  // grafonnet's dashboard.link.dashboards: a link to every dashboard with the given tags.
  link:: {
    dashboards:: {
      new(title, tags):: {
        title: title,
        type: 'dashboards',
        tags: asArray(tags),
        asDropdown: false,
        includeVars: false,
        keepTime: false,
        targetBlank: false,
        icon: 'external link',
        tooltip: '',
        url: '',
      },
      options:: {
        withAsDropdown(value=true):: { asDropdown: value },
        withIncludeVars(value=true):: { includeVars: value },
        withKeepTime(value=true):: { keepTime: value },
      },
    },
  },
  // Unlike grafonnet, numbers the panels (see g.libsonnet).
  withPanels(value):: { panels: util.panel.setPanelIDs(asArray(value)) },

  variable: {
    local generalOptions = {
      withLabel(value):: { label: value },
      withDescription(value):: { description: value },
      withCurrent(key, value=key):: {
        current: { selected: true, text: key, value: value },
      },
      showOnDashboard: {
        withLabelAndValue():: { hide: 0 },
        withValueOnly():: { hide: 1 },
        withNothing():: { hide: 2 },
      },
    },
    local selectionOptions = {
      withMulti(value=true):: { multi: value },
      // customAllValue: the regex that "All" stands for (e.g. '.*', which also matches a
      // missing label, where Grafana's default would list every value).
      withIncludeAll(value=true, customAllValue=null)::
        { includeAll: value }
        + (if customAllValue != null then { allValue: customAllValue } else {}),
    },

    datasource: {
      // type: the data source plugin id, e.g. 'prometheus'.
      new(name, type):: {
        type: 'datasource',
        name: name,
        query: type,
        refresh: 1,
        regex: '',
      },
      withRegex(value):: { regex: value },
      generalOptions: generalOptions,
    },

    query: {
      new(name, query=''):: {
        type: 'query',
        name: name,
        query: query,
        refresh: 2,
        regex: '',
        sort: 1,
      },
      withDatasource(type, uid):: { datasource: { type: type, uid: uid } },
      // variable: a datasource variable made with datasource.new.
      withDatasourceFromVariable(variable)::
        self.withDatasource(variable.query, '${%s}' % variable.name),
      withRegex(value):: { regex: value },
      withSort(i=0, type='alphabetical', asc=true, caseInsensitive=false)::
        local base = { disabled: 0, alphabetical: 1, numerical: 3, natural: 7 }[type];
        {
          sort:
            if i != 0 then i
            else if base == 0 then 0
            else if type == 'alphabetical' && caseInsensitive then (if asc then 5 else 6)
            else base + (if asc then 0 else 1),
        },
      queryTypes: {
        withLabelValues(label, metric=''):: {
          query:
            if metric == '' then 'label_values(%s)' % label
            else 'label_values(%s, %s)' % [metric, label],
        },
      },
      refresh: {
        onLoad():: { refresh: 1 },
        onTime():: { refresh: 2 },
      },
      generalOptions: generalOptions,
      selectionOptions: selectionOptions,
    },

    custom: {
      // values: strings, or {key: text, value: value} objects (Grafana's `key : value`
      // syntax); the first one is the default.
      new(name, values)::
        local opts = [
          if std.isString(v) then { key: v, value: v } else v
          for v in values
        ];
        {
          type: 'custom',
          name: name,
          query: std.join(',', [
            if o.key == o.value then o.key else '%s : %s' % [o.key, o.value]
            for o in opts
          ]),
          options: [
            { selected: i == 0, text: opts[i].key, value: opts[i].value }
            for i in std.range(0, std.length(opts) - 1)
          ],
          current: { selected: true, text: opts[0].key, value: opts[0].value },
        },
      generalOptions: generalOptions,
      selectionOptions: selectionOptions,
    },
  },
}
