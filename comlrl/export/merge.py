"""A run's agents as plain Hugging Face model folders, to serve or fine-tune without comlrl or peft.

    merge_run("runs/x", "merged/")      # merged/agent<i>/: config, safetensors weights, tokenizer

Each LoRA agent is its base model with its adapter merged in (`peft`'s `merge_and_unload`); a full-model
agent (`agents.mode=full`) is written as it is. The folders load with `AutoModelForCausalLM.from_pretrained`
and `vllm.LLM(model=...)`. The weights come from the run's `final/` (or `checkpoints/step-<k>/weights/`);
`policies.json` there names the base models. A folder that exists and is not empty is refused: nothing
already written is replaced. Files get the modes the umask gives (safetensors writes 0600), so the merged
weights are as readable as any file the user writes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

__all__ = ["MergeError", "merge_run", "weights_dir"]


class MergeError(ValueError):
    """The run or the output folder cannot be used; one line naming the path."""


def weights_dir(run_dir: Path, step: int | None = None) -> Path:
    """Where the run's agent weights are: `final/`, or the weights of checkpoint `step`."""
    src = run_dir / "final" if step is None else run_dir / "checkpoints" / f"step-{step}" / "weights"
    if not (src / "policies.json").is_file():
        what = "final weights (the run has not finished?)" if step is None else f"checkpoint of step {step}"
        raise MergeError(f"{src}: no {what}: policies.json is missing")
    return src


def _dtype(run_dir: Path) -> str:
    """The run's model.dtype (its config.yaml; float32 when it cannot be read)."""
    try:
        from omegaconf import OmegaConf

        value = OmegaConf.load(run_dir / "config.yaml").model.dtype
    except Exception:  # noqa: BLE001 - the dtype is a convenience; the weights say the rest
        return "float32"
    return value if value in ("float32", "bfloat16") else "float32"


def _base_path(meta: dict[str, Any], agent: int) -> str:
    """The base model's folder as the run resolved it, or resolved again here (the run moved machines)."""
    path = meta["paths"][agent]
    if Path(path).is_dir():
        return str(path)
    from comlrl.models import resolve_model_path

    return resolve_model_path(meta["models"][agent])


def merged_agent(src: Path, meta: dict[str, Any], agent: int, dtype: str) -> Any:
    """Agent `agent` as one plain `PreTrainedModel`: adapter merged into its base, or its full weights."""
    from comlrl.models import load_model
    from comlrl.tree.nodes import agent_name

    folder = src / agent_name(agent)
    if meta["mode"] == "full":
        return load_model(str(folder), dtype)
    from peft import PeftModel

    base = load_model(_base_path(meta, agent), dtype)
    return PeftModel.from_pretrained(base, str(folder)).merge_and_unload()


def merge_run(run_dir: str | Path, out: str | Path, step: int | None = None) -> list[Path]:
    """Write `out/agent<i>/` for every agent of the run (see the module docstring); returns the folders."""
    run, dest = Path(run_dir), Path(out)
    src = weights_dir(run, step)
    meta = json.loads((src / "policies.json").read_text())
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise MergeError(f"{dest} exists and is not empty; choose a new folder (nothing is overwritten)")
    from transformers import AutoTokenizer

    from comlrl.models import publishable
    from comlrl.tree.nodes import agent_name

    dtype = _dtype(run)
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for agent in range(int(meta["num_agents"])):
        name = agent_name(agent)
        tmp = dest / f".{name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        merged_agent(src, meta, agent, dtype).save_pretrained(tmp)
        AutoTokenizer.from_pretrained(str(src / name)).save_pretrained(tmp)
        publishable(tmp)
        tmp.replace(dest / name)
        written.append(dest / name)
    (dest / "merged.json").write_text(json.dumps({"run": str(run.resolve()), "weights": str(src.resolve()),
                                                  "mode": meta["mode"], "models": meta["models"], "dtype": dtype},
                                                 indent=1))
    return written
