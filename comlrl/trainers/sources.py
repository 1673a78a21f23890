"""Where a compatible trainer's agents come from, as `model.name` / `agents.models`: hub ids and local folders
(strings, as this engine's loader takes them: comlrl/models.py), or models already loaded, which are saved with
their tokenizer into a temporary folder that the config names (the loader reads folders, not objects).
`model_config` (1.4.3's dict) gives the dtype; keys that would change tokenization are refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.errors import ConfigError

DTYPES = {"float32": "float32", "bfloat16": "bfloat16"}  # model.dtype; 1.4.3's torch_dtype / dtype, as a name


@dataclass
class Sources:
    """The config keys naming the agents' models, warning lines, and the temporary folder loaded models were
    saved to (removed when the owner is collected; None when every source was a name)."""

    keys: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    folder: Path | None = None


def _per_agent(value: Any, num_agents: int) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        items = list(value)
        if len(items) != num_agents:
            raise ConfigError(f"config error: tokenizer: {len(items)} tokenizers for {num_agents} agents")
        return items
    return [value] * num_agents


def _name(source: Any) -> str | None:
    return os.fspath(source) if isinstance(source, str | os.PathLike) else None


def agent_sources(agent_model: Any, agents: Sequence[Any] | None, num_agents: int) -> list[Any]:
    """One source per agent, as 1.4.3 resolves `agent_model` (every agent) and `agents` (one each); both only
    when they name the same model."""
    if agent_model is None and agents is None:
        raise ConfigError("config error: agent_model: either agent_model or agents must be provided")
    if agents is not None:
        if isinstance(agents, str | bytes) or not isinstance(agents, Sequence) or not agents:
            raise ConfigError("config error: agents: expected a non-empty list (one model or name per agent)")
        if len(agents) != num_agents:
            raise ConfigError(f"config error: agents: {len(agents)} entries for num_agents={num_agents}")
        if agent_model is not None and any(_name(a) != _name(agent_model) or _name(a) is None for a in agents):
            raise ConfigError("config error: agents: given with agent_model, every entry must name agent_model's "
                              "model")
        return list(agents)
    return [agent_model] * num_agents


def _dtype(model_config: Mapping[str, Any], out: Sources) -> None:
    value = model_config.get("torch_dtype", model_config.get("dtype"))
    if value is None or str(value) == "auto":
        return
    name = str(value).removeprefix("torch.")
    if name not in DTYPES:
        raise ConfigError(f"config error: model_config: dtype {value!r} is not allowed; expected float32 or bfloat16")
    out.keys["model.dtype"] = DTYPES[name]


def read_model_config(model_config: Mapping[str, Any] | None, out: Sources, nested: bool = False) -> None:
    """The dtype as model.dtype; special tokens refused (they change what every prompt tokenizes to); other keys
    (attention backend, loader kwargs) a warning: this engine's loader chooses them. `nested`: a dtype under
    `model_kwargs` comes first, as 1.4.3's actor-critics read it."""
    cfg = dict(model_config or {})
    if cfg.get("special_tokens"):
        raise ConfigError("config error: model_config: special_tokens cannot be added here (the agents' tokenizers "
                          "come from their model folders); save a tokenizer with them and pass the folder")
    inner = dict(cfg.get("model_kwargs") or {}) if nested and isinstance(cfg.get("model_kwargs"), Mapping) else {}
    dtype = inner.get("torch_dtype") or inner.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype")
    _dtype({"torch_dtype": dtype}, out)
    known = ("torch_dtype", "dtype", "special_tokens", *(("model_kwargs",) if inner else ()))
    rest = sorted(k for k in cfg if k not in known) + sorted(f"model_kwargs.{k}" for k in inner
                                                             if k not in ("torch_dtype", "dtype"))
    if rest:
        out.warnings.append(f"model_config: {', '.join(rest)} have no meaning here (the model loader chooses them)")


def _save(model: Any, tokenizer: Any, dest: Path, label: str) -> None:
    """A loaded model and its tokenizer as a folder this engine's loader reads."""
    if tokenizer is None:
        raise ConfigError(f"config error: tokenizer: {label} is a loaded model; pass its tokenizer as well")
    if not tokenizer.chat_template:
        raise ConfigError(f"config error: tokenizer: the tokenizer of {label} has no chat template (this engine "
                          "prompts through it)")
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    if not (dest / "config.json").is_file():
        raise ConfigError(f"config error: {label}: save_pretrained wrote no config.json (an adapter?); merge it "
                          "into its base model first")


def resolve_sources(sources: list[Any], tokenizer: Any, model_config: Mapping[str, Any] | None,
                    owner: object, nested: bool = False) -> Sources:
    """model.name / agents.models for the agents' sources; loaded models saved once each (by identity) into a
    temporary folder that lives as long as `owner`; `nested`: see `read_model_config`."""
    out = Sources()
    read_model_config(model_config, out, nested)
    tokenizers = _per_agent(tokenizer, len(sources))
    paths: list[str] = []
    saved: dict[int, str] = {}
    for a, (src, tok) in enumerate(zip(sources, tokenizers, strict=True)):
        name = _name(src)
        if name is not None:
            paths.append(name)
            continue
        if id(src) not in saved:
            if out.folder is None:
                out.folder = Path(tempfile.mkdtemp(prefix="comlrl-magrpo-models-"))
                weakref.finalize(owner, shutil.rmtree, str(out.folder), True)
            dest = out.folder / f"agent_{a}"
            _save(src, tok, dest, f"agents[{a}]")
            saved[id(src)] = str(dest)
        paths.append(saved[id(src)])
    if tokenizer is not None and any(_name(s) is not None for s in sources):
        out.warnings.append("tokenizer: the agents' own tokenizers (from their model folders) are used")
    out.keys["model.name"] = paths[0]
    out.keys["agents.models"] = paths if len(set(paths)) > 1 else None
    return out
