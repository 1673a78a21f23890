"""Several training processes, each with its own rollout engine: a vLLM engine per rank against `hf` per rank.

Launched under accelerate (DDP, or DeepSpeed ZeRO-2 with its config), every rank builds the real trainer with
`rollout.engine=vllm` (its own colocated engine, comlrl/engines/vllm_engine.py) and an `hf` engine over the
same agents, then runs training steps alternating the two engines (ABBA order), each step the full
`training_step` (this rank's trees, sandbox scoring, the update synced over ranks; a negligible length
tie-break makes every completion train, benchmarks/_common.TieBreakTask). Per step it records the
slowest rank's step and rollout seconds and `weights_rank_spread` (0: every rank holds the same weights).
Last, every rank's vLLM engine answers the same prompts greedily: the same tokens on every rank, and the
same as the hf engine's on the trainer's weights, show that every engine serves the current policy.

    ACCELERATE_USE_CPU=true accelerate launch --config_file configs/accelerate/ddp_cpu.yaml \\
        benchmarks/ranks_step.py [--rounds 2] [--model smollm2-135m-instruct] [key=value ...]
    accelerate launch --config_file configs/accelerate/deepspeed_zero2.yaml --num_processes 2 \\
        benchmarks/ranks_step.py ...                       # (DS_ACCELERATOR=cpu on CPU)
    ... benchmarks/ranks_step.py --quick                   # tiny-random, 1 round, 8 tokens (a slow test)

Rank 0 writes benchmarks/results/ranks_step.json (`--quick`: ranks_step_quick.json) with the ratio of the
median step seconds, hf over vLLM.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, TieBreakTask, command, machine, median, setup, write  # noqa: E402

PROBE = [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="ABBA rounds: each round one step per engine")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--length", type=int, default=64, help="model.max_new_tokens")
    ap.add_argument("--quick", action="store_true", help="tiny-random, 1 round, 8 tokens")
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. training.trees_per_step=2")
    args = ap.parse_args()
    if args.quick:
        args.model, args.rounds, args.length = "tiny-random", 1, 8
    setup(threads=1)
    import torch

    from comlrl.config import load_config
    from comlrl.engines import HFEngine
    from comlrl.engines.vllm_engine import VLLMEngine
    from comlrl.trainer import build, training_step

    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", [
        f"model.name={args.model}", f"model.max_new_tokens={args.length}", "rollout.engine=vllm",
        "external.mode=plain", "logging.progress_bar=false", "dataset.eval_size=1", "dataset.max_problems=null",
        "training.torch_threads=1", "sandbox.cache=false", *args.overrides])
    t_build = time.perf_counter()
    comp = build(cfg)
    comp.task = TieBreakTask(comp.task)  # every completion trains, so the steps really move the weights
    acc = comp.accelerator
    if not isinstance(comp.engine, VLLMEngine):
        sys.exit(f"rank {acc.process_index}: the vllm engine did not start (the log says why)")
    engines = {"vllm": comp.engine, "hf": HFEngine(comp.policies)}
    world, rank = acc.num_processes, acc.process_index
    build_seconds = time.perf_counter() - t_build

    def slowest(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return float(t)

    steps: list[dict] = []
    trees: list[list] = []
    order = [name for r in range(args.rounds) for name in (("vllm", "hf") if r % 2 == 0 else ("hf", "vllm"))]
    for step, name in enumerate(order):
        comp.engine = engines[name]
        comp.engine.weights_changed()  # the other engine's steps moved the weights this one holds
        acc.wait_for_everyone()
        metrics, records = training_step(comp, step)
        roots = sorted({hashlib.sha1(repr(r.prompts).encode()).hexdigest()[:12] for r in records if r.parent is None})
        gathered: list = [None] * world
        torch.distributed.all_gather_object(gathered, roots)
        trees.append(gathered)
        steps.append({"engine": name, "step_seconds": round(slowest(metrics["step_seconds"]), 3),
                      "rollout_seconds": round(slowest(metrics["rollout_seconds"]), 3),
                      "update_seconds": round(slowest(metrics["update_seconds"]), 3),
                      "gen_tokens": metrics["gen_tokens"], "samples": metrics["samples"],
                      "weights_rank_spread": metrics["weights_rank_spread"]})
    comp.engine = engines["vllm"]
    comp.engine.weights_changed()
    requests = [(a, PROBE) for a in range(cfg.magrpo.num_agents)]
    tokens = [list(s[0].completion_ids) for s in comp.engine.generate(requests, 1, greedy=True)]
    # the trainer's own weights, through transformers: the engine serves them, not an older copy
    hf_tokens = [list(s[0].completion_ids) for s in engines["hf"].generate(requests, 1, greedy=True)]
    every: list = [None] * world
    torch.distributed.all_gather_object(every, (tokens, hf_tokens))
    every, matches_hf = [t for t, _ in every], [t == h for t, h in every]
    comp.sandbox.close()
    for engine in engines.values():  # then a barrier, as the trainer ends: the engines must leave the group
        engine.close()
    acc.wait_for_everyone()
    if rank != 0:
        return
    per = {name: median([s["step_seconds"] for s in steps if s["engine"] == name]) for name in engines}
    out = {"command": command("ranks_step.py"), "quick": args.quick, "machine": machine(1), "model": args.model,
           "world_size": world, "distributed_type": str(acc.distributed_type), "length": args.length,
           "rounds": args.rounds, "overrides": args.overrides, "build_seconds": round(build_seconds, 1),
           "engine_start_seconds": round(engines["vllm"].start_seconds, 1), "steps": steps,
           "trees_per_rank": trees, "greedy_probe_tokens": every,
           "greedy_same_on_every_rank": all(t == every[0] for t in every),
           "greedy_matches_hf_on_every_rank": all(matches_hf),
           "trees_differ_between_ranks": all(len({tuple(g[r]) for r in range(world)}) == world for g in trees),
           "max_weights_rank_spread": max(s["weights_rank_spread"] for s in steps),
           "median_step_seconds": per, "ratio_hf_over_vllm": round(per["hf"] / per["vllm"], 3)}
    write("ranks_step_quick" if args.quick and not args.out else "ranks_step", out, args.out)
    print(f"{world} processes ({out['distributed_type']}), an engine per rank: median step {per['vllm']:.1f} s "
          f"with vllm, {per['hf']:.1f} s with hf: {out['ratio_hf_over_vllm']:.2f}x; greedy output the same on "
          f"every rank: {out['greedy_same_on_every_rank']}; weights rank spread {out['max_weights_rank_spread']}")


if __name__ == "__main__":
    main()
