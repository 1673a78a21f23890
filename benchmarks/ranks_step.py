"""Several training processes and their rollout engines: a vLLM engine per rank, one rollout server for all
ranks, and `hf` per rank, in one launch.

Launched under accelerate (DDP, or DeepSpeed ZeRO-2 with its config), every rank builds the real trainer and
the engines named by `--engines` over the same agents (`vllm`: its own colocated engine,
comlrl/engines/vllm_engine.py; `vllm_server`: the rollout server the machine's rank 0 starts,
comlrl/engines/server_engine.py; `hf`), then runs training steps rotating the engines (forward in even
rounds, backward in odd ones: ABBA for two), each step the full `training_step` (this rank's trees, sandbox
scoring, the update synced over ranks; a negligible length tie-break makes every completion train,
benchmarks/_common.TieBreakTask). Per step it records the slowest rank's step and rollout seconds and
`weights_rank_spread` (0: every rank holds the same weights). Last, every rank's vLLM engines answer the same
prompts greedily: the same tokens on every rank, and the same as the hf engine's on the trainer's weights,
show that every engine serves the current policy; with the server, every rank also sends a request under the
previous policy version, which the server must refuse.

    ACCELERATE_USE_CPU=true accelerate launch --config_file configs/accelerate/ddp_cpu.yaml \\
        benchmarks/ranks_step.py [--engines vllm,hf] [--rounds 2] [--model smollm2-135m-instruct] [key=value ...]
    accelerate launch --config_file configs/accelerate/deepspeed_zero2.yaml --num_processes 2 \\
        benchmarks/ranks_step.py ...                       # (DS_ACCELERATOR=cpu on CPU)
    ... benchmarks/ranks_step.py --quick                   # tiny-random, 1 round, 8 tokens (a slow test)

Rank 0 writes benchmarks/results/ranks_step.json (`--quick`: ranks_step_quick.json; `--engines` other than
the default: ranks_step_<engines>.json) with the median step seconds per engine and each one's ratio to hf.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, TieBreakTask, command, machine, median, setup, write  # noqa: E402

PROBE = [{"role": "user", "content": "Write a Python function add(a, b) that returns a + b."}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engines", default="vllm,hf",
                    help="comma-separated rollout engines to rotate; leave hf out under ZeRO-3 with several processes "
                         "(it generates on the partitioned weights: only the final greedy probe, the same on "
                         "every rank, runs it)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds: each round one step per engine")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--length", type=int, default=64, help="model.max_new_tokens")
    ap.add_argument("--quick", action="store_true", help="tiny-random, 1 round, 8 tokens")
    ap.add_argument("--out", default=None)
    ap.add_argument("overrides", nargs="*", help="config overrides, e.g. training.trees_per_step=2")
    args = ap.parse_args()
    if args.quick:
        args.model, args.rounds, args.length = "tiny-random", 1, 8
    names = args.engines.split(",")
    fast = [n for n in names if n != "hf"]
    if not fast:
        sys.exit("--engines: name at least one vLLM engine (vllm, vllm_server)")
    setup(threads=1)
    import torch

    from comlrl.config.schema import load_config
    from comlrl.engines import HFEngine, build_engine
    from comlrl.engines.server_engine import RolloutServerError, ServerEngine
    from comlrl.engines.vllm_engine import VLLMEngine
    from comlrl.run.trainer import build, training_step

    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", [
        f"model.name={args.model}", f"model.max_new_tokens={args.length}", f"rollout.engine={fast[0]}",
        "external.mode=plain", "logging.progress_bar=false", "dataset.eval_size=1", "dataset.max_problems=null",
        "training.torch_threads=1", "sandbox.cache=false", *args.overrides])
    t_build = time.perf_counter()
    comp = build(cfg)
    comp.task = TieBreakTask(comp.task)  # every completion trains, so the steps really move the weights
    acc = comp.accelerator
    engines = {fast[0]: comp.engine}
    for name in fast[1:]:
        engines[name] = build_engine(replace(cfg.rollout, engine=name), comp.policies, cfg.training.seed)
    engines["hf"] = HFEngine(comp.policies)
    kinds = {"vllm": VLLMEngine, "vllm_server": ServerEngine}
    for name in fast:
        if not isinstance(engines[name], kinds[name]):
            sys.exit(f"rank {acc.process_index}: the {name} engine did not start (the log says why)")
    world, rank = acc.num_processes, acc.process_index
    build_seconds = time.perf_counter() - t_build

    def slowest(x: float) -> float:
        t = torch.tensor([x], dtype=torch.float64)
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return float(t)

    def on_every_rank(obj: object) -> list:
        every: list = [None] * world
        torch.distributed.all_gather_object(every, obj)
        return every

    steps: list[dict] = []
    trees: list[list] = []
    order = [name for r in range(args.rounds) for name in (names if r % 2 == 0 else names[::-1])]
    for step, name in enumerate(order):
        comp.engine = engines[name]
        acc.wait_for_everyone()
        metrics, records = training_step(comp, step)
        for engine in engines.values():  # the step told its own engine; the others' weights moved as well
            if engine is not comp.engine:
                engine.weights_changed()
        roots = sorted({hashlib.sha1(repr(r.prompts).encode()).hexdigest()[:12] for r in records if r.parent is None})
        trees.append(on_every_rank(roots))
        steps.append({"engine": name, "step_seconds": round(slowest(metrics["step_seconds"]), 3),
                      "rollout_seconds": round(slowest(metrics["rollout_seconds"]), 3),
                      "update_seconds": round(slowest(metrics["update_seconds"]), 3),
                      "gen_tokens": metrics["gen_tokens"], "samples": metrics["samples"],
                      "weights_rank_spread": metrics["weights_rank_spread"]})
    requests = [(a, PROBE) for a in range(cfg.magrpo.num_agents)]
    # the trainer's own weights, through transformers: every engine serves them, not an older copy
    hf_tokens = [list(s[0].completion_ids) for s in engines["hf"].generate(requests, 1, greedy=True)]
    probes = {}
    for name in fast:
        tokens = [list(s[0].completion_ids) for s in engines[name].generate(requests, 1, greedy=True)]
        probes[name] = on_every_rank((tokens, tokens == hf_tokens))
    server: dict = {}
    if "vllm_server" in engines:
        eng = engines["vllm_server"]
        try:  # this rank asks under the policy version before the last step's: the server must refuse it
            eng.client.call("/generate", {"version": eng.version - 1, "agent": 0, "prompts": [[1, 2, 3]],
                                          "sampling": []})
            refused = ""
        except RolloutServerError as exc:
            refused = str(exc)
        acc.wait_for_everyone()
        server = {"stale_refusals": on_every_rank(refused), "health": eng.client.call("/health"),
                  "version": eng.version, "pushes_by_rank": on_every_rank(eng.pushes),
                  "push_seconds_by_rank": on_every_rank(round(eng.push_seconds, 2))}
    gathers = on_every_rank({n: (engines[n].weights.gathers, round(engines[n].weights.gather_seconds, 3))
                             for n in fast})
    comp.sandbox.close()
    for engine in engines.values():  # then a barrier, as the trainer ends: the engines must leave the group
        engine.close()
    acc.wait_for_everyone()
    if rank != 0:
        return
    per = {name: median([s["step_seconds"] for s in steps if s["engine"] == name]) for name in names}
    per_rollout = {name: median([s["rollout_seconds"] for s in steps if s["engine"] == name]) for name in names}
    out = {"command": command("ranks_step.py"), "quick": args.quick, "machine": machine(1), "model": args.model,
           "engines": names, "world_size": world, "distributed_type": str(acc.distributed_type),
           "zero_stage": acc.state.deepspeed_plugin.zero_stage if acc.state.deepspeed_plugin else None,
           # ZeRO-3: each vLLM engine's gathers of the partitioned weights and their seconds, per rank
           "gathers": max(g for per_rank in gathers for g, _ in per_rank.values()),
           "gathers_per_rank": gathers,
           "length": args.length, "rounds": args.rounds, "overrides": args.overrides,
           "build_seconds": round(build_seconds, 1),
           "engine_start_seconds": {n: round(engines[n].start_seconds, 1) for n in fast
                                    if hasattr(engines[n], "start_seconds")},
           "steps": steps, "trees_per_rank": trees,
           "greedy_probe_tokens": {n: [t for t, _ in probes[n]] for n in fast},
           "greedy_same_on_every_rank": all(t == probes[n][0][0] for n in fast for t, _ in probes[n]),
           "greedy_matches_hf_on_every_rank": all(m for n in fast for _, m in probes[n]),
           "trees_differ_between_ranks": all(len({tuple(g[r]) for r in range(world)}) == world for g in trees),
           "max_weights_rank_spread": max(s["weights_rank_spread"] for s in steps),
           "median_step_seconds": per, "median_rollout_seconds": per_rollout,
           **{f"ratio_hf_over_{n}": round(per["hf"] / per[n], 3) for n in fast if "hf" in per}}
    if server:
        out["server"] = server
    if "vllm" in per and "vllm_server" in per:
        out["ratio_vllm_server_over_vllm"] = round(per["vllm_server"] / per["vllm"], 3)
    default = names == ["vllm", "hf"]
    name = "ranks_step" + ("" if default else "_" + "_".join(names)) + ("_quick" if args.quick else "")
    write(name if not args.out else "ranks_step", out, args.out)
    ratios = "".join(f"; hf/{n} {out[f'ratio_hf_over_{n}']:.2f}x" for n in fast if "hf" in per)
    print(f"{world} processes ({out['distributed_type']}): median step " + ", ".join(
        f"{n} {per[n]:.1f} s" for n in names) + ratios + "; greedy output the same on every rank: "
        f"{out['greedy_same_on_every_rank']} and as hf's on the trainer's weights: "
        f"{out['greedy_matches_hf_on_every_rank']}; weights rank spread {out['max_weights_rank_spread']}")


if __name__ == "__main__":
    main()
