"""Rollout throughput: comlrl's level-synchronous tree expander vs a per-node depth-first expander.

The depth-first baseline is the method of the CoMLRL reference implementation: it visits one node at a
time and calls `generate` once per agent with batch G, scores that node's joint actions, builds its
children's prompts and descends into each child before the next sibling. Both expanders drive the SAME
`comlrl.tree.rollout.Rollout` callables (the same AgentPolicies with LoRA adapters, task scoring in the
sandbox, feedback prompts), so only the expansion order and the batching differ. Same problems and seeds
for both; rounds alternate which one goes first; the ratio is the median of the per-round ratios of
generated tokens per second of rollout time (generation + scoring + feedback). Rollout time is counted as
the CPU time of this process (one torch thread: its wall-clock time on an idle core) plus the wall time
spent waiting for the sandbox, which scores in its own processes: on a shared machine this is stable
where the wall clock swings with the load. Wall-clock rates are reported next to it.

    python benchmarks/rollout_throughput.py [--rounds 3] [--budget-min 9.5] [--max-new-tokens 32]
                                            [--cross-max-new-tokens 16]
    python benchmarks/rollout_throughput.py --quick      # tiny-random smoke run (seconds)

Writes benchmarks/results/rollout_throughput.json (`--quick`: rollout_throughput_quick.json).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, machine, median, rss_mb, setup, write  # noqa: E402


def expand_depth_first(rollout, shape) -> list:
    """The per-node baseline: one `generate` per node per agent (batch G), depth-first."""
    from comlrl.tree.nodes import Node, joint_actions, should_terminate
    from comlrl.tree.rollout import make_roots

    actions = joint_actions(shape.num_agents, shape.num_generations, shape.joint_mode)
    roots = make_roots([rollout.initial_messages(p) for p in rollout.problems], "df")

    def visit(node: Node) -> None:
        node.completions = [rollout.generate([(a, node.messages[a])], shape.num_generations)[0]
                            for a in range(shape.num_agents)]
        node.joint = list(actions)
        scored = rollout.score([(node, act) for act in actions])
        node.rewards = [float(s.reward) for s in scored]
        node.details = [s.detail for s in scored]
        node.next_states = [s.next_state for s in scored]
        if node.turn == shape.num_turns:
            return
        node.terminated = should_terminate(node.rewards, shape.threshold)
        if node.terminated:
            return
        pairs = [(node, j) for j in range(len(actions))]
        for (_, j), msgs in zip(pairs, rollout.next_messages(pairs), strict=True):
            node.children[j] = Node(id=node.child_id(j), turn=node.turn + 1, root=node.root, messages=msgs,
                                    parent=node, parent_action=j, state=node.next_states[j])
        for j in sorted(node.children):
            visit(node.children[j])

    for root in roots:
        visit(root)
    return roots


def run_once(comp, problems, shape, impl: str, seed: int) -> dict:
    import torch

    from comlrl.tree.nodes import TreeStats

    torch.manual_seed(seed)
    rollout = comp.rollout(problems)
    t0, c0 = time.perf_counter(), time.process_time()
    roots = rollout.run(shape, tag="ls") if impl == "level_sync" else expand_depth_first(rollout, shape)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    busy = cpu + rollout.score_seconds
    stats = TreeStats.of(roots, shape.num_turns)
    joint = sum(stats.joint_actions)
    return {
        "busy_seconds": round(busy, 3), "cpu_seconds": round(cpu, 3),
        "busy_tokens_per_s": round(rollout.gen_tokens / busy, 2),
        "busy_joint_actions_per_s": round(joint / busy, 3),
        "seconds": round(wall, 3), "gen_tokens": rollout.gen_tokens, "nodes": sum(stats.nodes),
        "joint_actions": joint, "gen_seconds": round(rollout.gen_seconds, 3),
        "score_seconds": round(rollout.score_seconds, 3), "feedback_seconds": round(rollout.feedback_seconds, 3),
        "tokens_per_s": round(rollout.gen_tokens / wall, 2), "joint_actions_per_s": round(joint / wall, 3),
        "gen_tokens_per_gen_s": round(rollout.gen_tokens / max(1e-9, rollout.gen_seconds), 2),
    }


class ConfigBench:
    """One config (align_T2_G4 or cross_T2_G4): built once, then measured round by round."""

    def __init__(self, name: str, args, max_new_tokens: int) -> None:
        from comlrl.config.schema import load_config
        from comlrl.run.trainer import build
        from comlrl.tree.rollout import TreeShape

        overrides = [f"model.max_new_tokens={max_new_tokens}", f"training.torch_threads={args.threads}",
                     "sandbox.cache=false", "logging.progress_bar=false", f"training.trees_per_step={args.trees}",
                     "rollout.engine=hf",  # the expander comparison of an earlier issue: hf generate on both sides
                     "dataset.max_problems=6"]  # the problems the recorded results used (the quick start trains on 2)
        if args.quick:
            overrides += ["model.name=tiny-random", "external.mode=plain"]
        cfg = load_config(ROOT / "configs" / f"{name}.yaml", overrides)
        t0 = time.perf_counter()
        self.comp = comp = build(cfg, for_training=False)
        self.name, self.trees = name, args.trees
        m = cfg.magrpo
        self.shape = TreeShape(m.num_agents, m.num_generations, m.num_turns, m.joint_mode,
                               m.early_termination_threshold)
        print(f"# {name}: built in {time.perf_counter() - t0:.1f}s ({cfg.model.name}, {cfg.agents.mode}, "
              f"max_new_tokens={cfg.model.max_new_tokens}, {args.trees} tree(s) per rollout, "
              f"sandbox {comp.sandbox.isolation}), load {os.getloadavg()[0]:.2f}", flush=True)
        comp.policies.generate([(0, comp.task.initial_messages(comp.train[0])[0])], 1)  # warm-up (not timed)
        self.rec: dict = {
            "config": name, "model": cfg.model.name, "max_new_tokens": cfg.model.max_new_tokens,
            "joint_mode": m.joint_mode, "num_agents": m.num_agents, "num_generations": m.num_generations,
            "num_turns": m.num_turns, "trees_per_rollout": args.trees, "external_mode": cfg.external.mode,
            "level_sync": [], "depth_first": [], "token_ratios": [], "joint_action_ratios": [],
            "wall_token_ratios": [], "wall_joint_action_ratios": [], "round_seconds": []}

    def round(self, r: int) -> None:
        rec, comp, t0 = self.rec, self.comp, time.perf_counter()
        problems = [comp.train[(r * self.trees + i) % len(comp.train)] for i in range(self.trees)]
        order = ("level_sync", "depth_first") if r % 2 == 0 else ("depth_first", "level_sync")
        res = {impl: run_once(comp, problems, self.shape, impl, seed=1000 + r) for impl in order}
        for impl in order:
            rec[impl].append(res[impl])
        ls, df = res["level_sync"], res["depth_first"]
        rec["token_ratios"].append(round(ls["busy_tokens_per_s"] / df["busy_tokens_per_s"], 3))
        rec["joint_action_ratios"].append(round(ls["busy_joint_actions_per_s"] / df["busy_joint_actions_per_s"], 3))
        rec["wall_token_ratios"].append(round(ls["tokens_per_s"] / df["tokens_per_s"], 3))
        rec["wall_joint_action_ratios"].append(round(ls["joint_actions_per_s"] / df["joint_actions_per_s"], 3))
        rec["round_seconds"].append(round(time.perf_counter() - t0, 1))
        print(f"# {self.name} round {r + 1} ({problems[0].task_id}): level-sync {ls['busy_seconds']:.1f}s "
              f"({ls['seconds']:.1f}s wall) {ls['busy_tokens_per_s']:.1f} tok/s, depth-first {df['busy_seconds']:.1f}s "
              f"({df['seconds']:.1f}s wall) {df['busy_tokens_per_s']:.1f} tok/s, ratio {rec['token_ratios'][-1]:.2f}x "
              f"(wall {rec['wall_token_ratios'][-1]:.2f}x), load {os.getloadavg()[0]:.2f}", flush=True)

    def finish(self) -> dict:
        rec = self.rec
        rec["rounds"] = len(rec["token_ratios"])
        for key in ("token_ratios", "joint_action_ratios", "wall_token_ratios", "wall_joint_action_ratios"):
            rec[f"median_{key[:-1]}"] = median(rec[key])
        for impl in ("level_sync", "depth_first"):
            for key in ("busy_tokens_per_s", "busy_joint_actions_per_s", "tokens_per_s", "joint_actions_per_s",
                        "busy_seconds", "seconds", "gen_tokens", "gen_seconds", "score_seconds", "feedback_seconds"):
                rec[f"{impl}_median_{key}"] = median([x[key] for x in rec[impl]])
        self.comp.sandbox.close()
        return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="at most this many rounds per config")
    ap.add_argument("--budget-min", type=float, default=9.5,
                    help="start another round of a config only if its last round still fits in this wall time "
                         "(every config gets at least one round)")
    ap.add_argument("--max-new-tokens", type=int, default=32, help="align_T2_G4 (and any other config)")
    ap.add_argument("--cross-max-new-tokens", type=int, default=16, help="cross_T2_G4: 17 nodes per tree")
    ap.add_argument("--trees", type=int, default=1, help="trees (problems) per rollout, as training.trees_per_step")
    ap.add_argument("--configs", nargs="+", default=["align_T2_G4", "cross_T2_G4"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="tiny-random model, 8 new tokens, 1 round")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        # a smoke run of the script (tests/benchmarks): one round of each config, as --help says; the
        # second round (the other expander first) doubled its rollouts and measured nothing more
        args.rounds, args.max_new_tokens = 1, min(args.max_new_tokens, 8)
        args.cross_max_new_tokens = min(args.cross_max_new_tokens, 8)
    setup(args.threads)
    t_start = time.perf_counter()
    info = machine(args.threads)
    benches = [ConfigBench(name, args, args.cross_max_new_tokens if "cross" in name else args.max_new_tokens)
               for name in args.configs]
    for r in range(args.rounds):  # round-robin over the configs, within the time budget
        for b in benches:
            last = b.rec["round_seconds"][-1] if b.rec["round_seconds"] else 0.0
            if r == 0 or time.perf_counter() - t_start + last < args.budget_min * 60:
                b.round(r)
    results = {b.name: b.finish() for b in benches}

    print(f"\n{'config':<12} {'expander':<12} {'rollout s':>10} {'wall s':>7} {'tokens':>7} {'tok/s':>7} "
          f"{'joint/s':>8} {'gen s':>7} {'score s':>8} {'fb s':>6}")
    for name, rec in results.items():
        for impl in ("level_sync", "depth_first"):
            m = {k[len(impl) + 8:]: v for k, v in rec.items() if k.startswith(f"{impl}_median_")}
            print(f"{name:<12} {impl:<12} {m['busy_seconds']:>10.1f} {m['seconds']:>7.1f} {m['gen_tokens']:>7.0f} "
                  f"{m['busy_tokens_per_s']:>7.1f} {m['busy_joint_actions_per_s']:>8.2f} {m['gen_seconds']:>7.1f} "
                  f"{m['score_seconds']:>8.1f} {m['feedback_seconds']:>6.2f}")
        print(f"{name:<12} {'ratio':<12} per round {', '.join(f'{x:.2f}' for x in rec['token_ratios'])} -> "
              f"{rec['median_token_ratio']:.2f}x tokens/s, {rec['median_joint_action_ratio']:.2f}x joint actions/s "
              f"(wall clock {rec['median_wall_token_ratio']:.2f}x)")
    out = {"command": command("rollout_throughput.py"), "quick": args.quick, "max_rounds": args.rounds,
           "budget_min": args.budget_min,
           "machine": info, "rss_mb": round(rss_mb()), "configs": results,
           "total_s": round(time.perf_counter() - t_start, 1), "total_cpu_s": round(time.process_time(), 1)}
    write("rollout_throughput_quick" if args.quick and not args.out else "rollout_throughput", out, args.out)
    summary = ", ".join(f"{name} {rec['median_token_ratio']:.2f}x tokens/s and {rec['median_joint_action_ratio']:.2f}x "
                        f"joint actions/s over {rec['rounds']} round(s) "
                        f"(wall clock {rec['median_wall_token_ratio']:.2f}x)"
                        for name, rec in results.items())
    print(f"level-synchronous vs per-node depth-first rollout (median of alternating rounds): "
          f"{summary}; target >= 3x")


if __name__ == "__main__":
    main()
