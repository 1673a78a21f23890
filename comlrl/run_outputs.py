"""What a run writes to `training.output_dir`: metrics.jsonl, TensorBoard, optional W&B, trees.jsonl.

Only rank 0 constructs a writer. Files are appended line by line and flushed, so a crash loses at most
the line being written; a resumed run truncates lines past its checkpoint step so nothing is doubled.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from comlrl.config import ConfigError, RunConfig, to_yaml
from comlrl.tree import Node


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def truncate_jsonl(path: Path, keep: Any) -> None:
    """Keep only the lines for which keep(record) is true (used on resume)."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if keep(json.loads(line)):
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)


class RunWriter:
    def __init__(self, cfg: RunConfig, resume_step: int = 0) -> None:
        self.dir = Path(cfg.training.output_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "config.yaml").write_text(to_yaml(cfg))
        self.metrics_path = self.dir / "metrics.jsonl"
        self.trees_path = self.dir / "trees.jsonl"
        if resume_step > 0:
            truncate_jsonl(self.metrics_path, lambda r: r.get("step", 0) <= resume_step)
            truncate_jsonl(self.trees_path, lambda r: r.get("step", 0) <= resume_step)
        else:
            for p in (self.metrics_path, self.trees_path):
                p.unlink(missing_ok=True)
        self.tb = None
        if cfg.logging.tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(log_dir=str(self.dir / "tensorboard"), purge_step=resume_step + 1 or None)
        self.wandb = None
        if cfg.logging.wandb:
            try:
                import wandb
            except ImportError:
                raise ConfigError("config error: logging.wandb=true needs the wandb package (pip install wandb)") from None
            self.wandb = wandb.init(project=cfg.logging.wandb_project, dir=str(self.dir), resume="allow",
                                    config=json.loads(json.dumps(to_yaml(cfg))))

    def log(self, metrics: dict[str, Any]) -> None:
        record = {k: _clean(v) for k, v in metrics.items()}
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        step = int(metrics["step"])
        if self.tb is not None:
            for k, v in metrics.items():
                if k != "step" and isinstance(v, int | float) and math.isfinite(v):
                    self.tb.add_scalar(k, v, step)
            self.tb.flush()
        if self.wandb is not None:
            self.wandb.log(record, step=step)

    def write_trees(self, records: list[dict]) -> None:
        with self.trees_path.open("a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()


def _text(completion: Any) -> str:
    return getattr(completion, "text", completion)


def _detail(detail: Any) -> Any:
    if detail is None:
        return None
    comps = getattr(detail, "components", None)
    out: dict[str, Any] = {}
    if comps is not None:
        out["components"] = dict(comps)
    for name in ("tests_passed", "tests_total", "helper_called", "helper_result_used", "thin_wrapper"):
        if hasattr(detail, name):
            out[name] = getattr(detail, name)
    return out or None


def node_records(roots: list[Node], step: int, prefix: str, num_agents: int) -> list[dict]:
    """One JSON-ready record per node of every tree, ids made unique per step and rank."""
    records = []
    for root in roots:
        for node in root.walk():
            records.append(
                {
                    "step": step,
                    "id": f"{prefix}{node.id}",
                    "parent": None if node.parent is None else f"{prefix}{node.parent}",
                    "parent_action": node.parent_action,
                    "turn": node.turn,
                    "tree": f"{prefix}{node.root}",
                    "prompts": node.messages,
                    "completions": [[_text(c) for c in node.completions[a]] for a in range(num_agents)],
                    "joint_actions": [list(j) for j in node.joint],
                    "rewards": node.rewards,
                    "returns": node.returns,
                    "advantages": node.advantages,
                    "reward_details": [_detail(d) for d in node.details],
                    "pruned": node.terminated,
                    "children": {str(j): f"{prefix}{c.id}" for j, c in node.children.items()},
                }
            )
    return records
