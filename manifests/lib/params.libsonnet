// The configuration's schema language and its checked merge: `defaults + params`, as
// kube-prometheus composes a component's configuration, but with every key of `params`
// checked against the defaults first. A misspelt key (`everyMinute`) would otherwise be
// ignored without a word and the default used; a value of the wrong type would fail deep in
// a component, far from the key that caused it. Every problem is reported at once, one line
// each, with the key's path: the `fioprobe manifests config: ` prefix tells
// scripts/generate.d/30-manifests.sh to print these lines without jsonnet's stack trace.
//
// A schema is the defaults object itself (lib/defaults.libsonnet). A plain value is its own
// default and fixes the type (string, number, boolean); a plain object has exactly the keys
// it lists, merged key by key. Where that is not enough, a node made here says more:
//   nullable(type)       null by default, or a value of `type`; an explicit null is the default
//   optional(type)       absent by default (and then absent from the merged object); null too
//   required(type)       must be given (items of lists)
//   oneOf(default, [t])  a value of one of several types (e.g. 'auto' or a number)
//   map(default, type, keys)  keys of its own (labels, selectors; `keys`: only those, when
//                        another schema owns them); merged key by key, null removes a key
//   list(item, default)  a list whose items are checked (and completed) by the `item` schema;
//                        a list given replaces the default, it is not appended to
//   check(node, test, problem, json)  a further condition on the value; `problem`, what is
//                        wrong (text, or a function of the value); `json`, the same
//                        condition in JSON Schema keywords, for the Helm chart's schema
//   type(name)           a value of a type given by name, without a default
// A key `'#name'::` beside `name` documents it (the generated table in docs/MANIFESTS.md); an
// object with a `'#title'::` (a Kubernetes type) is named by it instead of listing its keys.
local u = import '../../lib/util.libsonnet';

{
  local prefix = 'fioprobe manifests config: ',
  local node(kind, fields) = { '#kind':: kind } + fields,
  local kindOf(schema) =
    if std.isObject(schema) && std.objectHasAll(schema, '#kind') then schema['#kind']
    else if std.isObject(schema) then 'object'
    else std.type(schema),
  // A type given by name ('string', 'number', 'boolean', 'object', 'array') or as a schema.
  local asSchema(type) = if std.isString(type) then node('type', { name: type }) else type,

  type(name):: asSchema(name),
  nullable(type):: node('nullable', { type: asSchema(type) }),
  optional(type):: node('optional', { type: asSchema(type) }),
  required(type):: node('required', { type: asSchema(type) }),
  oneOf(default, types):: node('oneOf', { default: default, types: [asSchema(t) for t in types] }),
  map(default={}, type=null, keys=null):: node('map', { default: default, type: type, keys: keys }),
  list(item, default=[], unique=null):: node('list', { item: asSchema(item), default: default, unique: unique }),
  check(schema, test, problem, json=null):: node('check', { schema: schema, test: test, problem: problem, json: json }),

  // --- describing a value and a type, for messages and the documentation table ------------

  local shown(value) =
    local text = if std.isString(value) then std.escapeStringJson(value)
    else std.manifestJsonMinified(value);
    if std.length(text) > 40 then text[:37] + '...' else text,

  // The type a node accepts, in words.
  typeName(schema)::
    local k = kindOf(schema);
    if k == 'type' then schema.name
    else if k == 'nullable' then $.typeName(schema.type) + ' or null'
    else if k == 'optional' || k == 'required' then $.typeName(schema.type)
    else if k == 'oneOf' then std.join(' or ', [$.typeName(t) for t in schema.types])
    else if k == 'map' then (if schema.type == null then 'map' else 'map of ' + schema.type)
    else if k == 'object' && std.objectHasAll(schema, '#title') then schema['#title']
    else if k == 'list' then 'list of ' + (
      if kindOf(schema.item) != 'object' then $.typeName(schema.item)
      else if std.objectHasAll(schema.item, '#title') then schema.item['#title']
      else 'objects'
    )
    else if k == 'check' then $.typeName(schema.schema)
    else k,

  // The default a node stands for; `absent` for an optional key.
  local absent = { '#absent':: true },
  local isAbsent(v) = std.isObject(v) && std.objectHasAll(v, '#absent'),
  default(schema)::
    local k = kindOf(schema);
    if k == 'object' then {
      [key]: $.default(schema[key])
      for key in std.objectFields(schema)
      if !isAbsent($.default(schema[key]))
    }
    else if k == 'nullable' || k == 'type' then null
    else if k == 'optional' || k == 'required' then absent
    else if k == 'oneOf' || k == 'map' || k == 'list' then schema.default
    else if k == 'check' then $.default(schema.schema)
    else schema,

  // --- checking --------------------------------------------------------------------------

  local unknownKey(at, key, allowed) = u.unknownKey(at, key, allowed),

  // The jsonnet type every value of a node has, or null when it may have several.
  local baseType(schema) =
    local k = kindOf(schema);
    if k == 'type' then schema.name
    else if k == 'object' || k == 'map' then 'object'
    else if k == 'list' then 'array'
    else if k == 'check' then baseType(schema.schema)
    else if std.member(['string', 'number', 'boolean'], k) then k
    else null,
  local where(path) = if path == '' then 'the configuration' else path,
  local typeProblem(path, schema, value) =
    ['%s: expected %s, got %s' % [where(path), $.typeName(schema), if value == null then 'null' else std.type(value) + ' ' + shown(value)]],

  // Every problem of `value` against `schema`, as messages naming the key's path.
  local problemsOf(path, schema, value) =
    local k = kindOf(schema);
    if k == 'object' then (
      if !std.isObject(value) then typeProblem(path, schema, value)
      else
        local allowed = std.objectFields(schema);
        local at(key) = if path == '' then key else path + '.' + key;
        std.flattenArrays([
          if std.objectHas(schema, key) then problemsOf(at(key), schema[key], value[key])
          else [unknownKey(at(key), key, allowed)]
          for key in std.objectFields(value)
        ] + [
          ['%s: is required' % at(key)]
          for key in allowed
          if kindOf(schema[key]) == 'required' && !std.objectHas(value, key)
        ])
    )
    else if k == 'nullable' then
      if value == null then []
      else if std.member([null, std.type(value)], baseType(schema.type)) then problemsOf(path, schema.type, value)
      else typeProblem(path, schema, value)
    else if k == 'optional' then
      if value == null then [] else problemsOf(path, schema.type, value)
    else if k == 'required' then
      if value == null then ['%s: is required, got null' % path] else problemsOf(path, schema.type, value)
    else if k == 'oneOf' then
      // The alternatives of the value's own type: when one of them is close (a profile given
      // as an object), its problems name the wrong key instead of just the types.
      local same = [t for t in schema.types if std.member([null, std.type(value)], baseType(t))];
      if std.length([t for t in same if problemsOf('', t, value) == []]) > 0 then []
      else if std.length(same) == 1 then problemsOf(path, same[0], value)
      else typeProblem(path, schema, value)
    else if k == 'map' then (
      if !std.isObject(value) then typeProblem(path, schema, value)
      else [
        unknownKey(path + '.' + key, key, schema.keys)
        for key in std.objectFields(value)
        if schema.keys != null && !std.member(schema.keys, key)
      ] + [
        '%s.%s: expected %s, got %s %s' % [path, key, schema.type, std.type(value[key]), shown(value[key])]
        for key in std.objectFields(value)
        if schema.type != null && value[key] != null && std.type(value[key]) != schema.type
      ]
    )
    else if k == 'list' then (
      if !std.isArray(value) then typeProblem(path, schema, value)
      else
        local items = std.flattenArrays([
          problemsOf('%s[%d]' % [path, i], schema.item, value[i])
          for i in std.range(0, std.length(value) - 1)
        ]);
        local names = if schema.unique == null || items != [] then [] else [
          item[schema.unique]
          for item in value
          if std.isObject(item) && std.objectHas(item, schema.unique)
        ];
        local twice = std.set([n for n in names if std.count(names, n) > 1]);
        items + [
          '%s: %s %s appears more than once' % [path, schema.unique, shown(n)]
          for n in twice
        ]
    )
    else if k == 'type' then (if std.type(value) == schema.name then [] else typeProblem(path, schema, value))
    else if k == 'check' then (
      local inner = problemsOf(path, schema.schema, value);
      local problem = if std.isFunction(schema.problem) then schema.problem(value) else schema.problem;
      if inner != [] || schema.test(value) then inner
      else ['%s: %s, got %s' % [where(path), problem, shown(value)]]
    )
    else if std.type(value) != k then typeProblem(path, schema, value)
    else [],

  problems(schema, value):: problemsOf('', schema, value),

  // --- merging ---------------------------------------------------------------------------

  // `value` over `base` (a merged value of the same schema); `value` is known to be valid.
  local mergeOnto(schema, base, value) =
    local k = kindOf(schema);
    if k == 'object' then
      local baseOf(key) = if std.objectHas(base, key) then base[key] else $.default(schema[key]);
      // [key, value] pairs: an array element is evaluated once, an object field on every use.
      local pairs = [
        [key, if std.objectHas(value, key) then mergeOnto(schema[key], baseOf(key), value[key]) else baseOf(key)]
        for key in std.objectFields(schema)
      ];
      { [p[0]]: p[1] for p in pairs if !isAbsent(p[1]) }
    else if k == 'nullable' then (if value == null then null else mergeOnto(schema.type, $.default(schema.type), value))
    else if k == 'optional' || k == 'required' then
      if value == null then absent else mergeOnto(schema.type, $.default(schema.type), value)
    else if k == 'oneOf' then
      local fits = [t for t in schema.types if problemsOf('', t, value) == []];
      mergeOnto(fits[0], $.default(fits[0]), value)
    else if k == 'map' then std.mergePatch(base, value)
    else if k == 'list' then [
      mergeOnto(schema.item, $.default(schema.item), item)
      for item in value
    ]
    else if k == 'check' then mergeOnto(schema.schema, base, value)
    else value,

  // defaults + params: `layers` (user objects, later ones win) merged over the defaults of
  // `schema`, after checking each of them. Rendering stops with every problem found.
  apply(schema, layers)::
    local found = std.flattenArrays([$.problems(schema, layer) for layer in layers]);
    if found != [] then error std.join('\n', [prefix + p for p in found])
    else std.foldl(function(base, layer) mergeOnto(schema, base, layer), layers, $.default(schema)),

  // --- JSON Schema, for the Helm chart ----------------------------------------------------

  // The JSON Schema of a node (draft 2020-12 keywords), for the chart's values.schema.json
  // (scripts/generate.d/32-chart.sh): the same keys, types and bounds that problems() checks,
  // so that the chart refuses what the manifests refuse. A check's test is jsonnet that JSON
  // Schema cannot run: its `json` says the same in JSON Schema keywords (merged over the inner
  // node's, so it may narrow the type), and a check without one stops the generator. What no
  // keyword can say (a list's unique names) is checked by the chart's templates.
  // `complete`: the object's keys with a default are always there (Helm merges values.yaml
  // under the user's values) and so required: a user's null removes a key in Helm, which the
  // manifests refuse as a value of the wrong type. Items of lists are completed by the
  // templates instead, where only required keys are required.
  jsonSchema(schema, complete=true)::
    local k = kindOf(schema);
    local docOf(key) = if std.objectHasAll(schema, '#' + key) then { description: schema['#' + key] } else {};
    local hasDefault(child) =
      local d = $.default(child);
      d != null && !isAbsent(d);
    if k == 'object' then
      local required = [
        key
        for key in std.objectFields(schema)
        if kindOf(schema[key]) == 'required' || (complete && hasDefault(schema[key]))
      ];
      {
        type: 'object',
        additionalProperties: false,
        properties: {
          [key]: docOf(key) + $.jsonSchema(schema[key], complete)
          for key in std.objectFields(schema)
        },
      } + (if required == [] then {} else { required: required })
    else if k == 'type' then { type: schema.name }
    else if k == 'nullable' || k == 'optional' then { anyOf: [$.jsonSchema(schema.type, complete), { type: 'null' }] }
    else if k == 'required' then $.jsonSchema(schema.type, complete)
    else if k == 'oneOf' then { anyOf: [$.jsonSchema(t, false) for t in schema.types] }
    else if k == 'map' then
      { type: 'object' }
      + (if schema.type == null then {} else { additionalProperties: { type: [schema.type, 'null'] } })
      + (if schema.keys == null then {} else { propertyNames: { enum: schema.keys } })
    else if k == 'list' then { type: 'array', items: $.jsonSchema(schema.item, false) }
    else if k == 'check' then
      if schema.json == null then error 'lib/params.libsonnet: a check without its JSON Schema (%s)' % schema.problem
      else
        local inner = $.jsonSchema(schema.schema, complete);
        // The hint's own alternatives replace the inner node's.
        (if std.objectHas(schema.json, 'anyOf') || std.objectHas(schema.json, 'enum') || std.objectHas(schema.json, 'const')
         then { [key]: inner[key] for key in std.objectFields(inner) if !std.member(['type', 'anyOf'], key) }
         else inner) + schema.json
    else { type: k },

  // The documentation table (docs/MANIFESTS.md) in Markdown, from rows() below.
  markdown(schema)::
    local cell(text) = std.strReplace(std.strReplace(std.strReplace(text, '|', '\\|'), '<', '&lt;'), '>', '&gt;');
    local default(row) =
      if !row.hasDefault || row.expanded then ''
      else '`%s`' % std.manifestJsonMinified(row.default);
    std.join('\n', [
      '| key | type | default | what |',
      '|---|---|---|---|',
    ] + [
      '| `%s` | %s | %s | %s |' % [
        row.key,
        cell(row.type),
        cell(default(row)),
        cell(if row.doc == null then error 'lib/defaults.libsonnet: %s has no doc (#%s)' % [row.key, row.key] else row.doc),
      ]
      for row in $.rows(schema)
    ]) + '\n',

  // The documentation table's rows, one per key: its path, type in words, default (where it
  // has one: not for required and optional keys) and doc.
  rows(schema, path='')::
    local k = kindOf(schema);
    local at(key) = if path == '' then key else path + '.' + key;
    local docOf(key) = if std.objectHasAll(schema, '#' + key) then schema['#' + key] else null;
    if k == 'object' then std.flattenArrays([
      local child = schema[key];
      local ck = kindOf(child);
      local inner = if ck == 'list' then child.item
      else if (ck == 'optional' || ck == 'required' || ck == 'nullable') then child.type
      else if ck == 'check' then child.schema
      else child;
      // Its own keys have rows of their own: an object, unless a '#title' (a Kubernetes type,
      // a shared part such as the volume model) says it is documented elsewhere.
      local expand = kindOf(inner) == 'object' && !std.objectHasAll(inner, '#title');
      [{
        key: at(key),
        expanded: expand && ck != 'list',
        type: $.typeName(child) + (if ck == 'required' then ', required' else if ck == 'optional' then ', optional' else ''),
        hasDefault: !(ck == 'required' || ck == 'optional'),
        default: if self.hasDefault then $.default(child) else null,
        doc: docOf(key),
      }] + (
        if !expand then []
        else if ck == 'list' then $.rows(inner, at(key) + '[]')
        else $.rows(inner, at(key))
      )
      for key in std.objectFields(schema)
    ])
    else [],
}
