"""Folders and archives of fio results found and read, for `report` and `backfill`.

`discover` walks files, nested folders and tar archives (read in place); `load` reads each
with the exporter's own reader (`fioprobe.fio.parse`) and groups runs by their folder's
name; `run_time` says when a result was taken; `progress` shows it moving on a terminal.
Below both commands, so neither borrows from the other; no matplotlib here.
"""
