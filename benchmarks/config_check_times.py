"""Seconds of `comlrl-train --config configs/X.yaml --check` for every shipped config (issue 36, defect 12: a
one-step tiny check should take seconds, not minutes). One after another, nothing else running.

    python benchmarks/config_check_times.py        # writes benchmarks/results/config_check_times.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from _common import RESULTS, ROOT, machine


def main() -> int:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    rows = []
    for config in sorted((ROOT / "configs").glob("*.yaml")):
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), "--config",
                              str(config.relative_to(ROOT)), "--check"], cwd=ROOT, env=env, capture_output=True,
                             text=True, timeout=1200)
        seconds = time.perf_counter() - t0
        ok = res.returncode == 0 and any(x.startswith("check passed") for x in res.stdout.splitlines())
        rows.append({"config": config.stem, "seconds": round(seconds, 1), "passed": ok,
                     "error": "" if ok else (res.stderr.strip().splitlines() or [""])[-1][:300]})
        print(f"{config.stem:28s} {seconds:6.1f} s {'passed' if ok else 'FAILED: ' + rows[-1]['error']}", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "config_check_times.json").write_text(json.dumps({"machine": machine(1), "rows": rows}, indent=1))
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
