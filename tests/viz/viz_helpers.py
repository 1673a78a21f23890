"""Shared helpers of the viz tests: synthetic runs built by the real tree code, and headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from comlrl.learn.advantages import assign_advantages
from comlrl.tree.nodes import backup_returns
from comlrl.tree.records import NodeRecord, node_records
from comlrl.tree.rollout import Scored, TreeShape, expand_trees, make_roots

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).with_name("data")
PYTHON = sys.executable
XSS = "</script><script>document.title='pwned';alert(1)</script>"
XSS_IMG = "<img src=x onerror=\"document.title='pwned'\">"
NODE_RE = re.compile(r'<g class="node[ "]')


def synthetic_records(step: int = 1, mode: str = "align", num_agents: int = 2, g: int = 2, turns: int = 3,
                      threshold: float | None = 0.5, trees: int = 1, prefix: str | None = None) -> list[NodeRecord]:
    """Node records as the trainer writes them, from fake generate/score/feedback callables.

    Rewards: 0.25 + 0.1 * (index of the joint action), except that a turn-2 node reached by joint action 1
    scores 1.0 everywhere, so with threshold 0.5 it is pruned. Agent 1's first completion at the root is
    an HTML/JS injection attempt and agent 0's first completion an <img> one.
    """

    def generate(requests: list[tuple[int, Any]], n: int) -> list[list[str]]:
        out = []
        for a, msgs in requests:
            root = msgs[-1]["content"] == "problem"
            out.append([XSS if (root and a == 1 and k == 0) else XSS_IMG if (root and a == 0 and k == 0)
                        else f"def f():\n    return {a * 10 + k}  # agent {a} sample {k}" for k in range(n)])
        return out

    def score(pairs: list[tuple[Any, tuple[int, ...]]]) -> list[Scored]:
        out = []
        for node, act in pairs:
            j = node.joint.index(act)
            hot = node.turn == 2 and node.parent_action == 1
            out.append(Scored(1.0 if hot else 0.25 + 0.1 * j))
        return out

    def next_messages(pairs: list[tuple[Any, int]]) -> list[list[list[dict]]]:
        return [[[{"role": "user", "content": f"feedback for {node.id}.{j} <b>&amp;</b>"}] for _ in range(num_agents)]
                for node, j in pairs]

    roots = make_roots([[[{"role": "system", "content": "sys"}, {"role": "user", "content": "problem"}]] * num_agents]
                       * trees)
    expand_trees(roots, TreeShape(num_agents, g, turns, mode, threshold), generate, score, next_messages)
    for root in roots:
        backup_returns(root, 1.0)
    assign_advantages(roots, "mean", "group", 1e-6)
    return node_records(roots, step, prefix if prefix is not None else f"s{step}r0t", num_agents)


def write_run(run_dir: Path, steps: dict[int, list[NodeRecord]] | None = None,
              metrics: list[dict] | None = None) -> Path:
    """A run directory with trees.jsonl (step -> records) and/or metrics.jsonl lines."""
    run_dir.mkdir(parents=True, exist_ok=True)
    if steps is not None:
        with (run_dir / "trees.jsonl").open("w") as f:
            for recs in steps.values():
                for r in recs:
                    f.write(r.to_line())
    if metrics is not None:
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    return run_dir


def chromium() -> str | None:
    """The headless browser, or None when it is not installed."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(url: str, profile: Path, *extra: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """One headless Chromium call (as root it needs --no-sandbox); nothing is fetched from the network."""
    exe = chromium()
    assert exe is not None
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
