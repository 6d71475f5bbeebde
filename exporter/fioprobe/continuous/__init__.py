"""The continuous stream: a low-rate write + fdatasync per target that Prometheus scrapes.

A scheduled probe sees a disk for seconds in every few minutes; this stream is looking when
the disk stalls or hangs. Each target's writer is a child process (`writer`), because a
write stuck in the kernel keeps its thread, and so its whole process, from ever exiting: a
child can be abandoned. The parent (`stream`) never touches a probed volume; it keeps what
its writers tell it (`state`) and turns that into metrics at scrape time (`collector`).

Modules, in the order data flows: writer -> protocol -> state -> collector -> stream (the
serving process) -> command (the command's run), with `device` (which block device a file
lands on) and `http` (/metrics served) beside them; the command's options and their bounds
are `fioprobe.cli.continuous_cmd`'s. docs/CONTINUOUS.md has the design.
"""
