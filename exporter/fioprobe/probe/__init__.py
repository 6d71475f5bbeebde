"""One probe on one target, and `fioprobe run` over all of them. In: the configuration
(`config.py`) and a target's directory; out: exactly one outcome per profile, handed to
`publish`. Everything that touches the probed volume runs in an abandonable child
(`volume_worker.py`).
"""
