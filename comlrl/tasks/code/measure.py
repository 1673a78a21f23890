"""Measure how often a model solves a problem set (single agent, sampled), to calibrate the easy set.

    HF_HUB_OFFLINE=1 python -m comlrl.tasks.code.measure --samples 4 --temperature 0.7 --max-new-tokens 128

Learning is only visible when the untrained model solves some problems sometimes, but not all of them
always; this prints the pass rate per problem and the fraction of problems solved at least once.
Programs run in a child process with a timeout and resource limits (the sandbox package does this
properly for training; this tool must also work without it, to validate data sets).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comlrl.llm.local_model import load_model, sample
from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import prompt_preamble
from comlrl.tasks.code.extract import extract_code, function_header
from comlrl.tasks.code.single import CodeSingleTask
from comlrl.tasks.datasets import load_problems


def check_program(problem: Problem, code: str, sentinel: str = "") -> str:
    """A program that raises unless `code` passes all of the problem's tests, then prints `sentinel`."""
    tail = f"print({sentinel!r})\n" if sentinel else ""
    return (
        f"{prompt_preamble(problem.prompt, problem.entry_point)}\n{code}\n\n{problem.test}\n\n"
        f"check({problem.entry_point})\n{tail}"
    )


def _limits() -> None:  # pragma: no cover - runs in the child
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))


def run_check(problem: Problem, code: str, timeout_s: float = 10.0) -> bool:
    """Whether `code` passes the problem's tests, run in a fresh child Python (never in this process).

    Success is a random sentinel printed after the tests, so code that exits early with status 0
    does not pass.
    """
    sentinel = f"comlrl-passed-{secrets.token_hex(8)}"
    with tempfile.TemporaryDirectory(prefix="comlrl-check-") as tmp:
        try:
            proc = subprocess.run(
                [sys.executable, "-I", "-c", check_program(problem, code, sentinel)],
                cwd=tmp,
                env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout_s,
                preexec_fn=_limits if os.name == "posix" else None,
            )
        except subprocess.TimeoutExpired:
            return False
    return proc.returncode == 0 and sentinel in proc.stdout.decode("utf-8", "replace").splitlines()


def canonical_code(problem: Problem) -> str:
    """The problem's prompt + canonical body, as one program text (the reference solution)."""
    return problem.prompt + (problem.canonical_solution or "")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Sample, extract, run; returns per-problem pass counts and the summary."""
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    problems = load_problems(args.dataset, args.path)[: args.limit]
    task = CodeSingleTask(sandbox=None)
    t0 = time.perf_counter()
    tok, model = load_model(args.model)
    model.eval()
    load_s = time.perf_counter() - t0
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for start in range(0, len(problems), args.batch):
        chunk = problems[start : start + args.batch]
        prompts = [
            tok.apply_chat_template(task.initial_messages(p)[0], tokenize=False, add_generation_prompt=True)
            for p in chunk
        ]
        for problem, completions in zip(
            chunk, sample(tok, model, prompts, args.samples, args.temperature, args.max_new_tokens), strict=True
        ):
            header = function_header(problem.prompt, problem.entry_point)
            codes = [extract_code(c, problem.entry_point, header) for c in completions]
            passed = [run_check(problem, code) for code in codes]
            rows.append({"task_id": problem.task_id, "entry_point": problem.entry_point,
                         "passed": sum(passed), "samples": len(passed),
                         "completions": completions if args.keep_completions else None})
            print(f"{problem.task_id:>10} {problem.entry_point:<24} {sum(passed)}/{len(passed)}", flush=True)
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
