"""Rollout engines and the shared-prefix update, measured on the same trees in one process.

Per config (align_T2_G4, cross_T2_G4; the embedded SmolLM2-135M with its LoRA agents), every round runs,
in alternating order, the same problems and seeds through:
  - `vllm`: the level-synchronous expander over the colocated vLLM engine,
  - `hf`: the same expander over transformers `generate` (the reference engine),
  - `depth_first` (first config only, --baseline): the per-node depth-first expander on the hf engine
    (CoMLRL's order; see rollout_throughput.py),
and reports generated tokens per second of rollout wall time (generation + scoring + feedback).
Then the update: the vLLM round's samples (with their advantages) go through the loss forward + backward
in micro-batches of `magrpo.loss.micro_batch_size`, once with each node's prompt shared by its G
completions and once with the prompt repeated per sample (alternating), and reports seconds per trained
completion. Last, the idle engine's cost to the update: the same update with the engine alive and idle,
then after it is closed.

    python benchmarks/engine_step.py [--rounds 3] [--max-new-tokens 128] [--threads 2]
    python benchmarks/engine_step.py --quick     # tiny-random smoke run

Writes benchmarks/results/engine_step.json (`--quick`: engine_step_quick.json).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, machine, median, rss_mb, setup, write  # noqa: E402
from rollout_throughput import expand_depth_first  # noqa: E402


def rollout_once(comp, engine, problems, shape, seed: int, depth_first: bool = False) -> tuple[dict, list]:
    import torch

    from comlrl.learn.advantages import assign_advantages
    from comlrl.tree.nodes import backup_returns

    comp.engine = engine
    torch.manual_seed(seed)
    rollout = comp.rollout(problems)
    t0 = time.perf_counter()
    roots = expand_depth_first(rollout, shape) if depth_first else rollout.run(shape, tag="b")
    wall = time.perf_counter() - t0
    m = comp.cfg.magrpo
    for root in roots:
        backup_returns(root, m.discount)
    assign_advantages(roots, m.advantage.baseline, m.advantage.scale, m.advantage.eps)
    return {"seconds": round(wall, 3), "gen_tokens": rollout.gen_tokens, "gen_seconds": round(rollout.gen_seconds, 3),
            "tokens_per_s": round(rollout.gen_tokens / wall, 2)}, roots


def trained_items(roots) -> list:
    """(sample, advantage) in the trainer's order: node by node, agent by agent, the G siblings together.
    Every completion of a node counts, also where its group tied (advantage 0), so both layouts see all."""
    return [(node.completions[a][k], float(adv[k]) if adv is not None else 0.0)
            for root in roots for node in root.walk() for a, adv in enumerate(node.advantages)
            for k in range(len(node.completions[a]))]


def update_pass(comp, items, share: bool) -> float:
    """Loss forward + backward over all items in micro-batches (no optimizer step: the weights stay put,
    so every pass sees the same model); returns wall seconds."""
    import torch

    from comlrl.learn.loss import aggregate, per_token_loss, step_normaliser

    lc = comp.cfg.magrpo.loss
    pol = comp.policies
    norm = step_normaliser([max(1, len(s.completion_ids)) for s, _ in items], lc.aggregation)
    pol.module.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    for i in range(0, len(items), lc.micro_batch_size):
        batch = items[i:i + lc.micro_batch_size]
        logps, mask = pol.token_logprobs([s for s, _ in batch], share_prefix=share)
        adv = torch.tensor([a for _, a in batch], dtype=logps.dtype)
        aggregate(per_token_loss(logps, adv), mask, lc.aggregation, norm).backward()
    wall = time.perf_counter() - t0
    pol.module.zero_grad(set_to_none=True)
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=128, help="align_T2_G4: the default config's value")
    ap.add_argument("--cross-max-new-tokens", type=int, default=48,
                    help="cross_T2_G4 (17 nodes, 136 completions per tree: the hf reference is slow)")
    ap.add_argument("--configs", nargs="+", default=["align_T2_G4", "cross_T2_G4"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-baseline", action="store_true", help="skip the depth-first hf baseline")
    ap.add_argument("--quick", action="store_true", help="tiny-random model, 8 new tokens, 1 round")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.max_new_tokens, args.cross_max_new_tokens = 1, 8, 8
    setup(args.threads)
    import torch

    from comlrl.config.schema import load_config
    from comlrl.engines import HFEngine
    from comlrl.run.trainer import build
    from comlrl.tree.rollout import TreeShape

    t_start = time.perf_counter()
    info = machine(args.threads)
    results: dict = {}
    comp = None
    for ci, name in enumerate(args.configs):
        new_tokens = args.cross_max_new_tokens if "cross" in name else args.max_new_tokens
        overrides = [f"model.max_new_tokens={new_tokens}", f"training.torch_threads={args.threads}",
                     "sandbox.cache=false", "logging.progress_bar=false", "rollout.engine=vllm",
                     "dataset.max_problems=6"]  # the problems the recorded results used (the quick start trains on 2)
        if args.quick:
            overrides += ["model.name=tiny-random", "external.mode=plain"]
        cfg = load_config(ROOT / "configs" / f"{name}.yaml", overrides)
        if comp is None:
            t0 = time.perf_counter()
            comp = build(cfg, for_training=False)
            vllm_engine = comp.engine
            if vllm_engine.name != "vllm":
                raise SystemExit("vllm engine did not start (see the warning above)")
            print(f"# built in {time.perf_counter() - t0:.1f}s (vllm start-up {vllm_engine.start_seconds:.1f}s), "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
            hf_engine = HFEngine(comp.policies)
        comp.cfg, comp.policies.cfg = cfg, cfg.model  # same model; this config's sampling and lengths
        m = cfg.magrpo
        shape = TreeShape(m.num_agents, m.num_generations, m.num_turns, m.joint_mode, m.early_termination_threshold)
        warm = [(0, comp.task.initial_messages(comp.train[0])[0])]
        for eng in (vllm_engine, hf_engine):  # first calls compile kernels / allocate: not timed
            eng.generate(warm, 2)
        rec: dict = {"config": name, "max_new_tokens": new_tokens, "vllm": [], "hf": [], "depth_first": [],
                     "ratio_vllm_hf": [], "ratio_vllm_depth_first": [], "update_shared_s": [],
                     "update_unshared_s": [], "update_ratio": [], "trained_completions": [], "update_tokens": {}}
        for r in range(args.rounds):
            problems = [comp.train[r % len(comp.train)]]
            impls = ["vllm", "hf"] + ([] if (args.no_baseline or ci > 0) else ["depth_first"])
            order = impls if r % 2 == 0 else impls[::-1]
            res, trees = {}, {}
            for impl in order:
                eng = vllm_engine if impl == "vllm" else hf_engine
                res[impl], trees[impl] = rollout_once(comp, eng, problems, shape, seed=1000 + r,
                                                      depth_first=impl == "depth_first")
                rec[impl].append(res[impl])
            rec["ratio_vllm_hf"].append(round(res["vllm"]["tokens_per_s"] / res["hf"]["tokens_per_s"], 3))
            if "depth_first" in res:
                rec["ratio_vllm_depth_first"].append(
                    round(res["vllm"]["tokens_per_s"] / res["depth_first"]["tokens_per_s"], 3))
            items = trained_items(trees["vllm"])
            pair = {}
            for share in ((True, False) if r % 2 == 0 else (False, True)):
                pair[share] = update_pass(comp, items, share)
            rec["update_shared_s"].append(round(pair[True] / len(items), 4))
            rec["update_unshared_s"].append(round(pair[False] / len(items), 4))
            rec["update_ratio"].append(round(pair[True] / pair[False], 3))
            rec["trained_completions"].append(len(items))
            shared = comp.policies.pack([s for s, _ in items[:m.num_generations]])
            unshared = comp.policies.pack([s for s, _ in items[:m.num_generations]], share_prefix=False)
            rec["update_tokens"] = {"shared": shared.tokens, "unshared": unshared.tokens}
            print(f"# {name} round {r + 1}: " + ", ".join(f"{k} {v['tokens_per_s']:.1f} tok/s ({v['seconds']:.1f}s)"
                                                          for k, v in res.items())
                  + f"; update {rec['update_shared_s'][-1]:.3f} vs {rec['update_unshared_s'][-1]:.3f} s/completion"
                  f" ({rec['update_ratio'][-1]:.2f}x), load {os.getloadavg()[0]:.2f}", flush=True)
        for key in ("ratio_vllm_hf", "ratio_vllm_depth_first", "update_ratio", "update_shared_s", "update_unshared_s"):
            rec[f"median_{key}"] = median(rec[key]) if rec[key] else None
        for impl in ("vllm", "hf", "depth_first"):
            if rec[impl]:
                rec[f"{impl}_median_tokens_per_s"] = median([x["tokens_per_s"] for x in rec[impl]])
        results[name] = rec
    # the idle engine's cost to the update: engine alive and idle, then closed
    items = trained_items(trees["vllm"])
    update_pass(comp, items, True)  # warm-up (allocator), not timed
    alive = [update_pass(comp, items, True) for _ in range(2)]
    vllm_engine.close()
    comp.engine = hf_engine
    del vllm_engine
    gc.collect()
    time.sleep(2)
    closed = [update_pass(comp, items, True) for _ in range(2)]
    idle = {"engine_alive_s": [round(x, 2) for x in alive], "engine_closed_s": [round(x, 2) for x in closed],
            "ratio": round(median(alive) / median(closed), 3)}
    print(f"# update with the vllm engine idle beside it: {median(alive):.1f}s; after closing it: "
          f"{median(closed):.1f}s ({idle['ratio']:.2f}x)")
    for name, rec in results.items():
        df = rec["median_ratio_vllm_depth_first"]
        print(f"{name}: vllm {rec['vllm_median_tokens_per_s']:.1f} tok/s vs hf {rec['hf_median_tokens_per_s']:.1f}: "
              f"{rec['median_ratio_vllm_hf']:.2f}x (target >= 4x)"
              + (f"; vs depth-first hf: {df:.2f}x (target >= 6x)" if df else "")
              + f"; update shared-prefix / unshared: {rec['median_update_ratio']:.2f}x (target <= 0.5x), "
              f"{rec['median_update_shared_s']:.3f} s per trained completion")
    out = {"command": command("engine_step.py"), "quick": args.quick, "machine": info, "rss_mb": round(rss_mb()),
           "torch_threads": torch.get_num_threads(), "configs": results, "idle_engine": idle,
           "total_s": round(time.perf_counter() - t_start, 1)}
    write("engine_step_quick" if args.quick and not args.out else "engine_step", out, args.out)


if __name__ == "__main__":
    main()
