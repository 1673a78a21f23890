"""The colocated vLLM CPU engine when another process shares the cores (issue 36, defect 13).

learn_easy_T1's evaluation before training took 21 minutes with a second CPU-bound process on the 2 cores,
about 4 alone: a 5x slowdown where sharing should cost about 2x. The engine runs in the trainer's process
on torch's OpenMP threads (one per core by default, `training.torch_threads=0`); GNU OpenMP's threads spin
at every barrier, so when one of them loses its core the others spin through its time slice.

Each setting runs in a fresh process (OpenMP reads its environment once, when torch loads): the embedded
model's vLLM engine generates the same requests (8 chat prompts x 4 samples x 64 tokens, seeded) alone,
then while a competitor runs (a one-thread torch matmul loop: a CPU-bound process like a tiny-random run),
then alone again, after one warm-up pass over the same requests (so every pass finds the prompts' prefixes
cached). Reported: tokens per second of each, and contended / idle.

    python benchmarks/vllm_contention.py            # every setting; writes benchmarks/results/vllm_contention.json
    python benchmarks/vllm_contention.py --settings "2 threads" "2 threads, passive wait"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import RESULTS, ROOT, machine  # noqa: E402

# name -> (training.torch_threads, extra environment)
SETTINGS = {
    "2 threads": (2, {}),
    "1 thread": (1, {}),
    "2 threads, passive wait": (2, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "2 threads, short spin": (2, {"GOMP_SPINCOUNT": "10000"}),
}
COMPETITOR = ("import torch\ntorch.set_num_threads(1)\na = torch.randn(384, 384)\n"
              "while True:\n    a = torch.tanh(a @ a)\n")


def _generate_rate(engine, requests: list, n: int) -> float:
    t0 = time.perf_counter()
    rows = engine.generate(requests, n, greedy=False)
    seconds = time.perf_counter() - t0
    return sum(len(s.completion_ids) for row in rows for s in row) / seconds


def child(name: str, tokens: int) -> dict:
    threads, _ = SETTINGS[name]
    from comlrl.console import quiet_console

    quiet_console()
    import torch

    from comlrl.config.schema import load_config
    from comlrl.run.components import build

    cfg = load_config(ROOT / "configs" / "learn_easy_T1.yaml",
                      [f"training.torch_threads={threads}", "rollout.engine=vllm", f"model.max_new_tokens={tokens}"])
    comp = build(cfg, for_training=False)
    problems = comp.train[:8]
    requests = [(0, comp.task.initial_messages(p)[0]) for p in problems]
    torch.manual_seed(0)
    _generate_rate(comp.engine, requests, 4)  # warm-up: every prompt's prefix cached, as in the three runs below
    idle = _generate_rate(comp.engine, requests, 4)
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR], env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        time.sleep(2)
        contended = _generate_rate(comp.engine, requests, 4)
    finally:
        competitor.kill()
        competitor.wait()
    time.sleep(1)
    idle_again = _generate_rate(comp.engine, requests, 4)
    comp.engine.close()
    if comp.sandbox is not None:
        comp.sandbox.close()
    return {"setting": name, "torch_threads": threads, "engine": type(comp.engine).__name__,
            "idle_tokens_per_s": idle, "contended_tokens_per_s": contended, "idle_again_tokens_per_s": idle_again,
            "contended_over_idle": contended / ((idle + idle_again) / 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="*", default=list(SETTINGS))
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, args.tokens)), flush=True)
        return 0
    rows = []
    for name in args.settings:
        env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                   **SETTINGS[name][1])
        res = subprocess.run([sys.executable, __file__, "--child", name, "--tokens", str(args.tokens)], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=1800)
        line = next((x for x in res.stdout.splitlines() if x.startswith("RESULT ")), None)
        if line is None:
            print(f"{name}: failed: {res.stderr.strip().splitlines()[-1:] }", flush=True)
            continue
        row = json.loads(line[7:])
        rows.append(row)
        print(f"{name:26s} idle {row['idle_tokens_per_s']:6.1f} tok/s, contended {row['contended_tokens_per_s']:6.1f}, "
              f"idle again {row['idle_again_tokens_per_s']:6.1f}: contended/idle {row['contended_over_idle']:.2f} "
              f"({row['engine']})", flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vllm_contention.json").write_text(json.dumps({"machine": machine(0), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
