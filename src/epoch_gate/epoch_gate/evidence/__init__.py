"""The evidence, as files and as parsed values: the pin, the catalog and its manifest, the world, a replay's
result and observations, freezes, held-out seeds. Every reader is strict (`strictjson`) and every writer
atomic (`atomic`). Stdlib only: the runner ships most of it into the jail (`epoch_gate.runner.SHIPPED_CORE`).
"""
