"""Generate interleaved reasoning + tool-call traces as JSONL (the `scripts/generate_traces.py` CLI).

    python scripts/generate_traces.py --backend openai-compatible:qwen2.5-coder:7b@http://127.0.0.1:11434/v1 \\
        --dataset humaneval --num-traces 100 --out traces.jsonl --only-success --chat-format
    python scripts/generate_traces.py --backend local:smollm2-135m-instruct --dataset easy --num-traces 8 --out t.jsonl

One trace per problem (up to `--attempts` tries when filters reject it). The output is appended to and
problems already in it are skipped, so an interrupted run resumes where it stopped. Every line has the
trace's `metrics`; `--chat-format` writes `{"messages": [...]}` records ready for supervised fine-tuning (one
message per round and tool response), `--training-format` the prompt and one assistant message per trace.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comlrl.cli import add_version
from comlrl.cli.trace_backends import make_backend
from comlrl.config.registry import import_plugins
from comlrl.console import quiet_console
from comlrl.cores import share_cores
from comlrl.tasks.base import Problem
from comlrl.tasks.tool_agent.backends import BackendError
from comlrl.tasks.tool_agent.environment import ToolEnvironment, load_edge_tests, record_edge_tests
from comlrl.tasks.tool_agent.episodes import EpisodeSettings, dumps, run_episodes

log = logging.getLogger("generate_traces")


def load_problems_arg(dataset: str) -> tuple[list[Problem], Path | None]:
    """`easy`, `humaneval` or a JSONL path -> problems, and the file whose records may hold edge tests."""
    from comlrl.tasks.datasets import easy_path, load_jsonl, load_problems

    if dataset in ("easy", "humaneval"):
        return load_problems(dataset), easy_path() if dataset == "easy" else None
    return load_jsonl(dataset), Path(dataset)


def read_done(path: Path) -> tuple[set[str], int]:
    """Task ids already written and how many lines; a torn last line (a crash mid-write) is cut off."""
    import json

    if not path.is_file():
        return set(), 0
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
        log.warning("%s: dropping a partial last line (%d bytes) left by an interrupted run", path, len(data) - keep)
        with path.open("r+b") as fh:
            fh.truncate(keep)
        data = data[:keep]
    done: set[str] = set()
    count = 0
    for line in data.decode("utf-8").splitlines():
        if not line.strip():
            continue
        try:
            done.add(str(json.loads(line)["task_id"]))
            count += 1
        except (ValueError, KeyError, TypeError):
            log.warning("%s: ignoring a line that is not a trace record", path)
    return done, count


def keep(metrics: dict[str, Any], only_success: bool, only_ideal: bool) -> bool:
    """The `--only-success` / `--only-ideal` filters."""
    if only_ideal and not metrics["ideal"]:
        return False
    return not (only_success and not metrics["success"])


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(ap)
    ap.add_argument("--backend", required=True,
                    help="local:<model>, openai-compatible:<model>@<base_url> (key: $OPENAI_COMPATIBLE_API_KEY), "
                         "ollama:<model>@<base_url> (native /api/chat; key: $OLLAMA_API_KEY) or <provider>:<model> "
                         "for a provider a --plugins module registers")
    ap.add_argument("--plugins", nargs="+", default=[], metavar="MODULE",
                    help="modules imported first; they may register providers "
                         "(comlrl.config.registry.register_provider)")
    ap.add_argument("--dataset", default="easy", help="easy, humaneval or a JSONL file in HumanEval format")
    ap.add_argument("--num-traces", type=int, required=True, help="traces to have in --out (existing ones count)")
    ap.add_argument("--out", required=True, help="JSONL output, appended to (resumable)")
    ap.add_argument("--only-success", action="store_true", help="keep traces whose final code passes all tests")
    ap.add_argument("--only-ideal", action="store_true",
                    help="keep successes after at least one observed fix, well-formed throughout")
    form = ap.add_mutually_exclusive_group()
    form.add_argument("--chat-format", action="store_true",
                      help="write {messages} records for fine-tuning, one message per round and tool response "
                           "(repaired calls rewritten as valid JSON)")
    form.add_argument("--training-format", action="store_true",
                      help="write {messages} records with the prompt and ONE assistant message per trace holding "
                           "the whole interleaved trace, tool responses inline (repaired calls rewritten)")
    ap.add_argument("--answer-prefix", default="",
                    help="text every answer starts with, continued by the model (e.g. '<think>\\n<tool_call>\\n' "
                         "makes a small model write a call; escapes like \\n are decoded)")
    ap.add_argument("--max-rounds", type=int, default=4, help="tool rounds per trace (default 4)")
    ap.add_argument("--attempts", type=int, default=1, help="tries per problem when filters reject a trace")
    ap.add_argument("--batch", type=int, default=4, help="episodes advanced together (default 4)")
    ap.add_argument("--max-tokens", type=int, default=512, help="completion tokens per round")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--greedy", action="store_true", help="greedy decoding (temperature 0 on a server)")
    ap.add_argument("--logprobs", action="store_true", help="store per-token log-probs (when available)")
    ap.add_argument("--max-prompt-tokens", type=int, default=2048, help="local backend: prompt cap")
    ap.add_argument("--concurrency", type=int, default=4, help="server backend: parallel requests")
    ap.add_argument("--timeout", type=float, default=120.0, help="server backend: request timeout (s)")
    ap.add_argument("--edge-tests", default=None, help="JSONL of {task_id, tests} edge-case tests")
    ap.add_argument("--no-doctests", action="store_true", help="do not add the docstring's >>> examples")
    ap.add_argument("--sandbox-workers", type=int, default=0, help="0 = one per core")
    ap.add_argument("--sandbox-timeout", type=float, default=5.0)
    ap.add_argument("--limit", type=int, default=None, help="first N problems of the data set only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (local backend; 0 = default)")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    quiet_console()
    share_cores()  # before torch loads: OpenMP reads it once
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for name, value, low in (("--num-traces", args.num_traces, 1), ("--max-rounds", args.max_rounds, 1),
                             ("--attempts", args.attempts, 1), ("--batch", args.batch, 1)):
        if value < low:
            print(f"error: {name} must be >= {low}, got {value}", file=sys.stderr)
            return 2
    try:
        import_plugins(args.plugins, key="--plugins")
        problems, record_file = load_problems_arg(args.dataset)
        edge = record_edge_tests(record_file) if record_file else {}
        if args.edge_tests:
            edge = {**edge, **load_edge_tests(args.edge_tests)}
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    problems = problems[: args.limit] if args.limit else problems
    fmt = "chat" if args.chat_format else "training" if args.training_format else "full"
    prefix = args.answer_prefix.encode("utf-8").decode("unicode_escape") if args.answer_prefix else ""
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done, have = read_done(out)
    todo = [p for p in problems if p.task_id not in done]
    if have >= args.num_traces or not todo:
        print(f"{out}: already holds {have} traces ({len(todo)} problems left); nothing to do")
        return 0
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.backend.startswith("local:"):
        import torch

        torch.manual_seed(args.seed)
    try:
        backend = make_backend(args.backend, max_tokens=args.max_tokens, temperature=args.temperature,
                               top_p=args.top_p, logprobs=args.logprobs, greedy=args.greedy,
                               concurrency=args.concurrency, timeout_s=args.timeout,
                               max_prompt_tokens=args.max_prompt_tokens, seed=args.seed)
    except (BackendError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 2
    from sandbox.executor import Sandbox

    sandbox = Sandbox(workers=args.sandbox_workers or None, timeout_s=args.sandbox_timeout)
    env = ToolEnvironment(sandbox, doctests=not args.no_doctests, edge_tests=edge)
    bar = None
    if not args.no_progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=args.num_traces, initial=min(have, args.num_traces), desc="traces", unit="trace",
                   dynamic_ncols=True)
    stats = {"episodes": 0, "success": 0, "ideal": 0, "written": 0, "rounds": 0}
    t0 = time.perf_counter()
    try:
        with out.open("a", encoding="utf-8") as fh:
            for start in range(0, len(todo), args.batch):
                if have >= args.num_traces:
                    break
                pending = todo[start : start + args.batch]
                for attempt in range(args.attempts):
                    if not pending or have >= args.num_traces:
                        break
                    episodes = run_episodes(backend, pending, env, max_rounds=args.max_rounds,
                                            settings=EpisodeSettings(), answer_prefix=prefix)
                    rejected = []
                    for ep in episodes:
                        m = ep.metrics()
                        stats["episodes"] += 1
                        stats["success"] += int(m["success"])
                        stats["ideal"] += int(m["ideal"])
                        stats["rounds"] += m["rounds"]
                        if not keep(m, args.only_success, args.only_ideal):
                            rejected.append(ep.problem)
                            continue
                        if have >= args.num_traces:
                            break
                        fh.write(dumps(ep.record(backend.name, fmt, attempt)) + "\n")
                        fh.flush()
                        have += 1
                        stats["written"] += 1
                        if bar:
                            bar.update(1)
                    pending = rejected
                if bar:
                    bar.set_postfix(success=f"{stats['success']}/{stats['episodes']}", ideal=stats["ideal"])
    except BackendError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    finally:
        if bar:
            bar.close()
        backend.close()
        sandbox.close()
    n = max(1, stats["episodes"])
    print(f"{out}: wrote {stats['written']} traces ({have} in the file); episodes {stats['episodes']}, "
          f"success {stats['success'] / n:.2f}, ideal {stats['ideal'] / n:.2f}, "
          f"mean rounds {stats['rounds'] / n:.2f}, {time.perf_counter() - t0:.1f}s")
    return 0
