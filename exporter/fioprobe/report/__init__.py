"""`fioprobe report`: comparison reports over folders and archives of fio results.

Pipeline: `fioprobe.results` (`discover`: files, nested folders, tar archives read in
place; `load`: the exporter's own reader, `fioprobe.fio.parse`, plus grouping) ->
`analysis` (fio's numbers into grids, baseline ratios, sweeps, steps; the contract's
buckets via `fioprobe.metrics.histogram`) and `verdict` (repeated runs against the
baseline: `significance`'s exact Mann-Whitney U, Holm's correction, a minimum effect) ->
`content` (every table of the report, computed once) -> `sections` + `tables` +
`verdict_view` (the document: one model, rendered as Markdown and self-contained HTML by
`document`, with `charts` as PNG) and `report_json` (the same numbers for machines).
`build` writes report.md, report.html, report.json and charts/*.png into one folder.

Importing this package does not import matplotlib; `fioprobe.report.build` does.
"""
