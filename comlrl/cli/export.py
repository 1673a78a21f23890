"""Export a run: its trees.jsonl as training data (SFT chat JSONL, preference pairs), its agents as models.

    python scripts/export.py runs/latest --sft data/sft.jsonl --pairs data/pairs.jsonl
    python scripts/export.py runs/latest/trees.jsonl --sft sft.jsonl --only-success --min-reward 1.0
    python scripts/export.py runs/latest --merge merged/      # merged/agent<i>/: plain HF models (LoRA merged)

SFT: one chat per agent per root-to-leaf trajectory (`{"messages": [...], "meta": {...}}`), or one per turn
with --per-turn. Pairs: best vs worst joint action of every node (`{"prompt", "chosen", "rejected", "meta"}`).
Works for every task (code collaboration, actions, ...). Role names come from the run's config.yaml.
Merge: each agent as a model folder transformers and vLLM load as they are (comlrl/export/merge.py), from the
run's final/ weights or, with --step K, its checkpoint of step K.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from comlrl.cli import add_version
from comlrl.export.trees import load_trees, nodes_with_gap, preference_pairs, sft_records, write_jsonl
from comlrl.tree.records import NodeRecord, RecordError


def role_names(trees_path: Path) -> list[str] | None:
    """The role names of the run's task, from config.yaml next to trees.jsonl (None when unknown)."""
    cfg = trees_path.parent / "config.yaml"
    if not cfg.is_file():
        return None
    try:
        from omegaconf import OmegaConf

        from comlrl.config.registry import TASKS, import_plugins
        from comlrl.config.schema import run_schema

        raw = OmegaConf.load(cfg)
        import_plugins(raw.get("plugins") or [])  # a task from a user module is registered there
        task = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(run_schema()), raw)).task
        return TASKS.get(task.name).roles_for(task)
    except Exception:  # noqa: BLE001 - role names are a convenience
        return None


def why_no_pairs(records: list[NodeRecord], args: argparse.Namespace) -> str:
    groups, gapped = nodes_with_gap(records, args.min_gap)
    if not gapped:
        return (f"no group with a reward difference: the {groups} nodes' joint actions all tied "
                f"(best - worst < --min-gap {args.min_gap:g})")
    return (f"{gapped} of {groups} nodes have a reward difference, but --only-success, --min-reward or --agents "
            "left none, or the chosen and rejected texts are equal")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(ap)
    ap.add_argument("trees", help="a run directory or its trees.jsonl")
    ap.add_argument("--merge", metavar="OUT", help="write each agent as a plain HF model folder OUT/agent<i>/ "
                                                    "(LoRA merged into the base; loads with transformers and vLLM)")
    ap.add_argument("--step", type=int, default=None,
                    help="--merge: the weights of checkpoint step K (default: final/)")
    ap.add_argument("--sft", metavar="OUT", help="write SFT chat records here")
    ap.add_argument("--pairs", metavar="OUT", help="write preference pairs here")
    ap.add_argument("--only-success", action="store_true",
                    help="keep trajectories whose last joint action succeeded (pairs: whose chosen one did)")
    ap.add_argument("--min-reward", type=float, default=None,
                    help="keep trajectories whose summed reward is at least this (pairs: chosen value)")
    ap.add_argument("--min-gap", type=float, default=1e-9, help="pairs: minimum best-worst value gap")
    ap.add_argument("--agents", type=int, nargs="*", default=None, help="agent indices to export (default all)")
    ap.add_argument("--per-turn", action="store_true", help="SFT: one record per turn instead of per trajectory")
    args = ap.parse_args(argv)
    if not args.sft and not args.pairs and not args.merge:
        ap.error("nothing to do: give --sft, --pairs and/or --merge")
    path = Path(args.trees)
    path = path / "trees.jsonl" if path.is_dir() else path
    if args.merge:
        from comlrl.console import quiet_console

        quiet_console()  # before transformers and peft load: their start-up chatter is not the user's
        from comlrl.export.merge import MergeError, merge_run

        try:
            folders = merge_run(path.parent, args.merge, args.step)
        except MergeError as exc:
            print(f"export: {exc}", file=sys.stderr)
            return 2
        for folder in folders:
            print(f"merged: {folder.name} -> {folder} (AutoModelForCausalLM.from_pretrained / vllm.LLM)")
        if not args.sft and not args.pairs:
            return 0
    if not path.is_file():
        print(f"export: {path} does not exist", file=sys.stderr)
        return 2
    try:
        records = load_trees(path)
    except RecordError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    roles = role_names(path)
    if args.sft:
        rows = sft_records(records, only_success=args.only_success, min_reward=args.min_reward, agents=args.agents,
                           role_names=roles, per_turn=args.per_turn)
        print(f"sft: {write_jsonl(args.sft, rows)} records -> {args.sft}")
    if args.pairs:
        rows = preference_pairs(records, min_gap=args.min_gap, only_success=args.only_success,
                                min_reward=args.min_reward, agents=args.agents, role_names=roles)
        n = write_jsonl(args.pairs, rows)
        print(f"pairs: {n} records -> {args.pairs}" + ("" if n else f" ({why_no_pairs(records, args)})"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
