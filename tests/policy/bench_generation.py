"""Generation throughput of the embedded model through AgentPolicies (not a test: run it by hand).

    python tests/policy/bench_generation.py --threads 2 --batches 8 16 32 --dtypes float32 bfloat16

Rows mix two agents (LoRA adapters on one base), prompts are a short coding task, sampling at the
default temperature; tokens/s counts real completion tokens (up to EOS), slot/s counts rows x steps.
tok/cpu-s divides by the process's CPU time: on a shared machine it is the steadier figure (with one
thread it approximates the wall-clock rate of an idle core).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from comlrl.config.schema import EMBEDDED_MODEL, AgentsConfig, ModelConfig
from comlrl.policy import AgentPolicies

PROMPT = "Write a Python function `add(a, b)` that returns the sum of a and b. Reply with code only."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=EMBEDDED_MODEL)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--no-eos", action="store_true", help="never stop early: every row decodes max-new-tokens")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads={args.threads} load={os.getloadavg()[0]:.2f}")
    msgs = [{"role": "user", "content": PROMPT}]
    pols = {}
    for dtype in args.dtypes:
        cfg = ModelConfig(name=args.model, dtype=dtype, max_new_tokens=args.max_new_tokens)
        pols[dtype] = pol = AgentPolicies(cfg, AgentsConfig(), num_agents=2)
        if args.no_eos:
            pol.eos_ids = [[len(pol.tokenizers[0]) - 1]] * 2  # an id that the model practically never emits
        pol.generate([(0, msgs)], 1)  # warm-up
    for batch in args.batches:  # dtypes interleaved so that load changes on a shared machine hit both alike
        for dtype, pol in pols.items():
            torch.manual_seed(0)
            t, c = time.perf_counter(), time.process_time()
            out = pol.generate([(i % 2, msgs) for i in range(batch // 2)], num_samples=2)
            dt, cpu = time.perf_counter() - t, time.process_time() - c
            samples = [s for row in out for s in row]
            toks = sum(len(s.completion_ids) for s in samples)
            steps = max(len(s.completion_ids) for s in samples)
            done = sum(s.finished for s in samples)
            print(f"{dtype:9s} batch={batch:3d} {toks / dt:7.1f} tok/s  {batch * steps / dt:7.1f} slot/s  "
                  f"{toks / cpu:7.1f} tok/cpu-s  {dt:6.1f} s  tokens={toks} finished={done}/{batch} "
                  f"load={os.getloadavg()[0]:.2f}", flush=True)

if __name__ == "__main__":
    main()
