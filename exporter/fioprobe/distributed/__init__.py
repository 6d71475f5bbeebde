"""`fioprobe distributed`: a benchmark plan run against fio servers, phase by phase.

A storage engineer qualifying a StorageClass runs fio servers on several nodes and one
client: a sequential write lays the data set out (prepare), then random reads and random
writes run on every server at once. This package reads the plan (`plan.py`), turns each phase
into a job file that passes the probes' allowlist and the plan's declared budget before any
server is contacted (`jobs.py`), runs one `fio --client` per phase (`client.py`), keeps
every phase's output where `report` and `backfill` read it (`archive.py`), prints each
server's figures beside fio's aggregate (`summary.py`) and pushes the benchmark once as its
own group (`benchmark.py`). A failure names its servers (`failures.py`), those that do not
answer fio's probe included (`liveness.py`, `silence.py`), which the clean-up then skips. A
fio server runs whatever job a client sends it: nothing but a checked job file is ever sent.
"""
