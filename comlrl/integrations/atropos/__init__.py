"""The project's tasks as Atropos environments (`pip install -e ".[atropos]"`, atroposlib 0.4.0).

The trainer side (comlrl learning from any Atropos environment through `run-api`) needs no atroposlib and
lives in `comlrl/run/atropos.py`.
"""
