"""One structured config for a whole run, validated at load time.

`load_config(path, overrides)` merges a YAML file and `key=value` overrides onto the dataclass schema
(`RunConfig` and this package's sections: `comlrl.config.sections`; re-exported here). Any unknown key, wrong
type or impossible value raises `ConfigError` with one line that names the
key and what is allowed, so a bad run fails before it loads a model.

Each part owns its section: the feedback modes `external` (`feedback.context.ExternalConfig`), the tasks
`dataset` (`comlrl.tasks.datasets.DatasetConfig`), `task` (`comlrl.tree.contracts.TaskConfig`) and their own
options (`task.<name>.*`, each task's `options_type`); the allowed values come from their owners
(`comlrl.config.checks.choices`). The checks and the resolution of defaults are `comlrl.config.checks`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import field, fields, is_dataclass, make_dataclass
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from comlrl.config.checks import (
    algorithm_sections,
    choices,
    normalize_slice,
    resolved,
    tree_joint_actions,
    validate,
    validate_threshold,
)
from comlrl.config.sections import (
    AdvantageConfig,
    AlgorithmConfig,
    EvaluationConfig,
    LoggingConfig,
    LossConfig,
    MagrpoConfig,
    RunConfig,
    TrainingConfig,
)
from comlrl.config.trl_names import trl_hint, with_trl_names
from comlrl.engines import RolloutConfig, VLLMSettings
from comlrl.errors import ConfigError
from comlrl.models import EMBEDDED_MODEL, AgentsConfig, LoraConfig, ModelConfig
from comlrl.tasks.datasets import DatasetConfig, DatasetFieldsConfig
from comlrl.tree.contracts import TaskConfig
from feedback.context import ExternalConfig
from sandbox.executor import SandboxConfig

__all__ = [
    "EMBEDDED_MODEL", "AdvantageConfig", "AgentsConfig", "AlgorithmConfig", "ConfigError", "EvaluationConfig",
    "LoggingConfig", "LossConfig", "MagrpoConfig", "TrainingConfig", "DatasetConfig", "DatasetFieldsConfig",
    "ExternalConfig",
    "LoraConfig", "ModelConfig", "RolloutConfig", "RunConfig", "SandboxConfig", "TaskConfig", "VLLMSettings",
    "choices", "default_config", "load_config", "normalize_slice", "resolved", "run_schema", "schema_keys", "to_yaml",
    "tree_joint_actions", "validate", "validate_threshold",
]


@functools.cache
def _schema(task_sections: tuple[tuple[str, type], ...],
            algorithm_sections: tuple[tuple[str, type], ...]) -> type[RunConfig]:
    task = make_dataclass("TaskConfig", [(name, t, field(default_factory=t)) for name, t in task_sections],
                          bases=(TaskConfig,))
    algorithm = make_dataclass("AlgorithmConfig", [(name, t, field(default_factory=t))
                                                   for name, t in algorithm_sections], bases=(AlgorithmConfig,))
    return make_dataclass("RunConfig", [("task", task, field(default_factory=task)),
                                        ("algorithm", algorithm, field(default_factory=algorithm))],
                          bases=(RunConfig,))


def run_schema() -> type[RunConfig]:
    """`RunConfig` whose `task` section holds one options section per registered task that declares an
    `options_type`, named like the task (`task.tool_agent.*`, `task.actions.*`, a plugin's own): built from
    the task registry, so a plugin task's options are keys like the built-ins'."""
    from comlrl.config.registry import TASKS

    taken = {f.name for f in fields(TaskConfig)} | {"options"}
    sections = []
    for name, task_type in TASKS.table.items():
        if task_type.options_type is not None:
            if name in taken:
                raise ConfigError(f"config error: task {name!r} cannot have options: task.{name} is a key of "
                                  "the task section itself")
            sections.append((name, task_type.options_type))
    return _schema(tuple(sections), algorithm_sections())


def _one_line(exc: OmegaConfBaseException, key: str | None = None) -> str:
    """`config error: <key>: <OmegaConf's first line>`; an unknown key that is TRL's name says which key it is."""
    key = key or exc.full_key
    hint = trl_hint(key) if key and isinstance(exc, ConfigKeyError) else None
    msg = str(exc).splitlines()[0].strip()
    return hint or (f"config error: {key}: {msg}" if key else f"config error: {msg}")


def _blame(exc: OmegaConfBaseException, base: list[DictConfig], overrides: list[str] | tuple[str, ...]) -> str:
    """Name the key: OmegaConf leaves it out when a whole section is replaced by a scalar."""
    if exc.full_key or not overrides:
        return _one_line(exc)
    for item in overrides:
        try:
            OmegaConf.to_object(OmegaConf.merge(*base, OmegaConf.from_dotlist([item])))
        except OmegaConfBaseException as one:
            return _one_line(one, item.split("=", 1)[0])
    return _one_line(exc)


def _read_yaml(p: Path) -> DictConfig:
    if not p.is_file():
        raise ConfigError(f"config error: config file {str(p)!r} does not exist")
    try:
        loaded = OmegaConf.load(p)
    except yaml.MarkedYAMLError as exc:  # a syntax error: file:line and what is wrong there
        mark = exc.problem_mark or exc.context_mark
        where = f"{p}:{mark.line + 1}" if mark else str(p)
        raise ConfigError(f"config error: {where}: {exc.problem or exc.context}") from None
    except Exception as exc:  # anything else OmegaConf refuses (duplicate keys, unreadable file)
        raise ConfigError(f"config error: {p}: {str(exc).splitlines()[0]}") from None
    if not isinstance(loaded, DictConfig):
        raise ConfigError(f"config error: {p} must hold a mapping of sections, not a list")
    return loaded


def _plugins(layers: list[DictConfig]) -> list[str]:
    """The `plugins` the layers name (read before the schema exists: plugin tasks add their options to it)."""
    try:
        value = OmegaConf.to_container(OmegaConf.merge(*layers)).get("plugins") if layers else None
    except OmegaConfBaseException:
        return []  # the schema's merge names what is wrong
    return [str(m) for m in value] if isinstance(value, list) else []


def _dict_layer(overrides: Mapping[str, Any]) -> DictConfig:
    """A dict of overrides as one layer: nested sections, dotted keys (`"training.steps": 3`), or both."""
    layer = OmegaConf.create({})
    for key, value in overrides.items():
        OmegaConf.update(layer, str(key), value, merge=True, force_add=True)
    return layer


def load_config(path: str | Path | RunConfig | None = None,
                overrides: Sequence[str] | Mapping[str, Any] = ()) -> RunConfig:
    """Merge schema defaults, a YAML file (or a `RunConfig`, e.g. one this returned) and overrides (`key=value`
    strings, or a dict: nested sections or dotted keys), import the `plugins` they list, validate, and return
    the resolved config; a `RunConfig` passed in is not changed. Anything wrong is one `ConfigError` line."""
    from comlrl.config.registry import import_plugins

    layers: list[DictConfig] = []
    overrides = with_trl_names(overrides)  # TRL's names for the same keys (max_steps=...): comlrl.config.trl_names
    try:
        if isinstance(path, RunConfig):  # a value of the wrong type set on it is named here
            layers.append(OmegaConf.structured(path))
        elif path is not None:
            layers.append(_read_yaml(Path(path)))
        if isinstance(overrides, Mapping):
            layers.append(_dict_layer(overrides))
            overrides = ()
    except OmegaConfBaseException as exc:
        raise ConfigError(_one_line(exc)) from None
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"config error: override {item!r} is not of the form key=value")
    try:
        if overrides:
            layers.append(OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as exc:
        raise ConfigError(_blame(exc, [OmegaConf.structured(run_schema()), *layers], overrides)) from None
    import_plugins(_plugins(layers))  # before the schema: plugins register tasks (their options) and names
    layers.insert(0, OmegaConf.structured(run_schema()))
    try:
        cfg = OmegaConf.to_object(OmegaConf.merge(*layers))
    except OmegaConfBaseException as exc:
        raise ConfigError(_blame(exc, layers[:-1] if overrides else layers, overrides)) from None
    assert isinstance(cfg, RunConfig)
    validate(cfg)
    return resolved(cfg)


def default_config() -> RunConfig:
    """Every default of the schema, the registered tasks' options included (not validated)."""
    return run_schema()()


def schema_keys(obj: Any = None, prefix: str = "") -> list[tuple[str, Any]]:
    """Every dotted key of the schema with its default, in schema order (for --help and docs checks)."""
    obj = default_config() if obj is None else obj
    out: list[tuple[str, Any]] = []
    for f in fields(obj):
        value = vars(obj)[f.name]
        if is_dataclass(value):
            out.extend(schema_keys(value, f"{prefix}{f.name}."))
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


def to_yaml(cfg: RunConfig) -> str:
    """The resolved config as YAML, loadable again by `load_config`."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
