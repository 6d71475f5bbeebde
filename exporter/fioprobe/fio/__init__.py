"""fio itself. In: a profile (a job file from jobs/) and a directory; out: fio's JSON read into the
typed model (`model.Run`), whatever fio version wrote it.
"""
