"""Measure how often a model solves a problem set (single agent, sampled), to calibrate the easy set.

    HF_HUB_OFFLINE=1 python -m comlrl.tasks.code.measure --samples 4 --temperature 0.7 --max-new-tokens 128

Learning is only visible when the untrained model solves some problems sometimes, but not all of them
always; this prints the pass rate per problem and the fraction of problems solved at least once.
A sample passes when the training reward says so: `CodeSingleTask` extracts its code and runs the tests
in the project's sandbox (`sandbox/`, with the default `sandbox.*` limits), the one place untrusted code
runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comlrl.llm.local_model import load_model, sample
from comlrl.tasks.base import Problem
from comlrl.tasks.code.single import CodeSingleTask
from comlrl.tasks.datasets import load_problems


def passes(task: CodeSingleTask, problem: Problem, completions: Sequence[str]) -> list[bool]:
    """Per completion, whether training would count it as solved: the task's reward, whose tests run in
    the task's sandbox and are judged one by one there, passed every test. So code that ends the
    program early (`sys.exit(0)`, `os._exit(0)`) before the asserts never passes."""
    return [r.all_passed for r in task.score([(problem, [c]) for c in completions])]


def measure_sandbox() -> Any:
    """The sandbox training uses by default (`sandbox.*` defaults of comlrl/config/schema.py)."""
    from sandbox.executor import Sandbox, SandboxConfig

    return Sandbox.of(SandboxConfig())


def canonical_code(problem: Problem) -> str:
    """The problem's prompt + canonical body, as one program text (the reference solution)."""
    return problem.prompt + (problem.canonical_solution or "")


def _sample_and_score(args: argparse.Namespace, problems: list[Problem], tok: Any, model: Any,
                      task: CodeSingleTask) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for start in range(0, len(problems), args.batch):
        chunk = problems[start : start + args.batch]
        prompts = [
            tok.apply_chat_template(task.initial_messages(p)[0], tokenize=False, add_generation_prompt=True)
            for p in chunk
        ]
        for problem, completions in zip(
            chunk, sample(tok, model, prompts, args.samples, args.temperature, args.max_new_tokens), strict=True
        ):
            passed = passes(task, problem, completions)
            rows.append({"task_id": problem.task_id, "entry_point": problem.entry_point,
                         "passed": sum(passed), "samples": len(passed),
                         "completions": completions if args.keep_completions else None})
            print(f"{problem.task_id:>10} {problem.entry_point:<24} {sum(passed)}/{len(passed)}", flush=True)
    return rows


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Sample, score in the sandbox; returns per-problem pass counts and the summary."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    problems = load_problems(args.dataset, args.path)[: args.limit]
    t0 = time.perf_counter()
    tok, model = load_model(args.model)
    model.eval()
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    with measure_sandbox() as box:
        rows = _sample_and_score(args, problems, tok, model, CodeSingleTask(box))
    solved = [r for r in rows if r["passed"] > 0]
    summary = {
        "problems": len(rows),
        "solved_at_least_once": len(solved),
        "solved_fraction": len(solved) / max(1, len(rows)),
        "always_solved": sum(r["passed"] == r["samples"] for r in rows),
        "sample_pass_rate": sum(r["passed"] for r in rows) / max(1, sum(r["samples"] for r in rows)),
        "samples": args.samples, "temperature": args.temperature, "max_new_tokens": args.max_new_tokens,
        "seed": args.seed, "load_seconds": round(load_s, 1), "sample_seconds": round(time.perf_counter() - t0, 1),
    }
    return {"summary": summary, "problems": rows}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="easy", choices=["easy", "humaneval", "jsonl"])
    ap.add_argument("--path", default=None, help="JSONL file for --dataset jsonl")
    ap.add_argument("--model", default=None, help="local HF model dir (default: embedded SmolLM2 GGUF)")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4, help="problems per generate call")
    ap.add_argument("--limit", type=int, default=None, help="first N problems only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--keep-completions", action="store_true")
    ap.add_argument("--out", default=None, help="write the full result as JSON here")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from comlrl.models import ModelError

    try:
        result = measure(args)
    except ModelError as exc:
        raise SystemExit(str(exc)) from None
    print(json.dumps(result["summary"], indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
