"""What the config schema's types cannot say: allowed values, ranges, and the defaults a run fills in.

`validate(cfg)` only reads: it raises `ConfigError` naming the first bad key and changes nothing.
`resolved(cfg)` returns a new config with CoMLRL's spellings mapped to ours, `external.sandbox_slice`
as a number and each task's run-dependent option defaults filled in (`Task.resolve_options`).
The allowed values come from the code that owns them (`choices`), so a registered plugin name is allowed
like a built-in one.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from comlrl.advantages import CREDITS, SCALES
from comlrl.engines import ENGINES
from comlrl.errors import ConfigError, require
from comlrl.models import AGENT_MODES, DTYPES
from comlrl.preference import SELECTIONS
from comlrl.registry import ALGORITHMS, ESTIMATORS, LOSSES, REWARDS, TASKS, TRANSITIONS
from comlrl.reward_funcs import validate_specs
from comlrl.tasks.datasets import DATASET_NAMES
from comlrl.tree import JOINT_MODES
from feedback.context import CONTEXTS, SLICE_OF, normalize_slice
from sandbox.isolation import LEVELS as ISOLATION_LEVELS

if TYPE_CHECKING:
    from comlrl.config import RunConfig

__all__ = ["AGENT_MODES", "JOINT_MODE_ALIASES", "LR_SCHEDULES", "choices", "normalize_slice", "resolved",
           "tree_joint_actions", "validate", "validate_threshold"]

log = logging.getLogger("comlrl")

CROSS_TREE_WARN = 1000  # scored joint actions per tree above which a cross-mode run is warned about
LR_SCHEDULES = ("constant", "linear", "cosine")  # magrpo.lr_schedule: comlrl/components.py maps each to transformers'
JOINT_MODE_ALIASES = {"aligned": "align", "crossed": "cross"}  # CoMLRL's spellings, accepted and stored as ours


def choices() -> dict[str, tuple[str, ...]]:
    """Allowed values per key, read from their owners: constants of the core, the feedback modes, the
    sandbox and the engines, and the registries (built-ins and plugins')."""
    modes = TRANSITIONS.names()  # + expert_edits: the expert's replies, or else the fallback mode's prompt
    return {
        "model.dtype": DTYPES, "agents.mode": AGENT_MODES, "dataset.name": DATASET_NAMES,
        "algorithm.name": ALGORITHMS.names(), "algorithm.dpo.pairs": SELECTIONS,
        "magrpo.joint_mode": JOINT_MODES, "magrpo.advantage.credit": CREDITS,
        "magrpo.advantage.baseline": ESTIMATORS.names(), "magrpo.advantage.scale": SCALES,
        "magrpo.loss.aggregation": LOSSES.names(), "magrpo.lr_schedule": LR_SCHEDULES,
        "external.sandbox_slice_of": SLICE_OF, "external.passed_context": CONTEXTS,
        "sandbox.isolation": ("auto", *ISOLATION_LEVELS), "rollout.engine": ENGINES,
        "task.name": TASKS.names(), "task.reward": REWARDS.names(),
        "external.mode": (*modes, "expert_edits"), "external.expert_fallback": modes,
    }


def _chosen(cfg: RunConfig) -> dict[str, Any]:
    """The value of every key `choices` constrains (the joint mode as stored: aliases mapped)."""
    m, x = cfg.magrpo, cfg.external
    return {
        "model.dtype": cfg.model.dtype, "agents.mode": cfg.agents.mode, "dataset.name": cfg.dataset.name,
        "algorithm.name": cfg.algorithm.name, "algorithm.dpo.pairs": cfg.algorithm.dpo.pairs,
        "magrpo.joint_mode": JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode),
        "magrpo.advantage.credit": m.advantage.credit, "magrpo.advantage.baseline": m.advantage.baseline,
        "magrpo.advantage.scale": m.advantage.scale, "magrpo.loss.aggregation": m.loss.aggregation,
        "magrpo.lr_schedule": m.lr_schedule, "external.sandbox_slice_of": x.sandbox_slice_of,
        "external.passed_context": x.passed_context, "sandbox.isolation": cfg.sandbox.isolation,
        "rollout.engine": cfg.rollout.engine, "task.name": cfg.task.name, "task.reward": cfg.task.reward,
        "external.mode": x.mode, "external.expert_fallback": x.expert_fallback,
    }


def validate(cfg: RunConfig) -> None:
    """Check values the schema's types cannot express; raises ConfigError naming the first bad key. Reads
    `cfg` only (`resolved` makes the config a run uses)."""
    chosen = _chosen(cfg)
    for key, allowed in choices().items():
        require(chosen[key] in allowed, key, chosen[key], "one of: " + ", ".join(allowed))
    task_type = TASKS.get(cfg.task.name)
    validate_specs(cfg.task.reward_funcs, cfg.task.reward_weights)
    if cfg.task.options() is not None:  # before the agent count: task.text.roles gives the text task's
        task_type.validate_options(cfg.task.options())
    roles = task_type.agents_for(cfg.task)
    if ALGORITHMS.get(cfg.algorithm.name).centralized:  # one policy writes every role's part
        require(task_type.centralizable and roles >= 2, "algorithm.name", cfg.algorithm.name,
                f"a task whose agents write parts of one answer (code_collab, code_coop, text with 2+ roles), "
                f"not task.name={cfg.task.name}")
    _validate_magrpo(cfg, agents=1 if ALGORITHMS.get(cfg.algorithm.name).centralized else roles)
    _validate_algorithm(cfg)
    normalize_slice(cfg.external.sandbox_slice)
    _validate_model(cfg)
    _validate_dataset(cfg)
    _validate_run(cfg)


def _validate_magrpo(cfg: RunConfig, agents: int) -> None:
    m = cfg.magrpo
    require(m.num_agents >= 1, "magrpo.num_agents", m.num_agents, "an integer >= 1")
    require(m.num_turns >= 1, "magrpo.num_turns", m.num_turns, "an integer >= 1")
    require(m.num_generations >= 1, "magrpo.num_generations", m.num_generations, "an integer >= 1")
    require(0.0 <= m.discount <= 1.0, "magrpo.discount", m.discount, "a number in [0, 1]")
    require(m.learning_rate > 0, "magrpo.learning_rate", m.learning_rate, "a number > 0")
    require(m.max_grad_norm > 0, "magrpo.max_grad_norm", m.max_grad_norm, "a number > 0")
    require(m.warmup_steps >= 0, "magrpo.warmup_steps", m.warmup_steps, "an integer >= 0")
    thr = m.early_termination_threshold
    require(thr is None or math.isfinite(thr), "magrpo.early_termination_threshold", thr, "a finite number or null")
    loss = m.loss
    require(loss.inner_epochs >= 1, "magrpo.loss.inner_epochs", loss.inner_epochs, "an integer >= 1")
    require(loss.clip_eps is None or loss.clip_eps > 0, "magrpo.loss.clip_eps", loss.clip_eps, "a number > 0 or null")
    require(loss.inner_epochs == 1 or loss.clip_eps is not None, "magrpo.loss.inner_epochs", loss.inner_epochs,
            "1 unless magrpo.loss.clip_eps is set (several epochs need the ratio clip)")
    require(loss.kl_coef >= 0, "magrpo.loss.kl_coef", loss.kl_coef, "a number >= 0")
    require(loss.micro_batch_size >= 1, "magrpo.loss.micro_batch_size", loss.micro_batch_size, "an integer >= 1")
    require(m.advantage.eps > 0, "magrpo.advantage.eps", m.advantage.eps, "a number > 0")
    for key, name, needs in (("magrpo.advantage.baseline", m.advantage.baseline, ESTIMATORS.get(m.advantage.baseline).needs),
                             ("magrpo.loss.aggregation", loss.aggregation, LOSSES.get(loss.aggregation).needs)):
        require(not needs, key, name, f"one whose inputs this trainer provides ({name} needs {', '.join(needs)})")
    require(m.num_agents == agents, "magrpo.num_agents", m.num_agents, f"{agents} for task.name={cfg.task.name}"
            + (f" with algorithm.name={cfg.algorithm.name} (one policy writes every role)" if agents == 1 and
               ALGORITHMS.get(cfg.algorithm.name).centralized else ""))
    if JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode) == "cross":
        per_node = m.num_generations ** m.num_agents
        require(per_node <= 4096, "magrpo.num_generations", m.num_generations,
                f"a value with num_generations**num_agents <= 4096 in cross mode (got {per_node})")
        total = tree_joint_actions("cross", m.num_generations, m.num_agents, m.num_turns)
        if total > CROSS_TREE_WARN:
            log.warning("magrpo.joint_mode=cross: %d^%d = %d joint actions per node make a %d-turn tree of up to %d "
                        "scored joint actions (> %d); expect slow steps, or lower num_generations/num_turns",
                        m.num_generations, m.num_agents, per_node, m.num_turns, total, CROSS_TREE_WARN)


def _validate_algorithm(cfg: RunConfig) -> None:
    a, m = cfg.algorithm, cfg.magrpo
    algo = ALGORITHMS.get(a.name)
    require(m.num_generations >= algo.min_generations, "magrpo.num_generations", m.num_generations,
            f"an integer >= {algo.min_generations} for algorithm.name={a.name}")
    require(algo.on_policy or m.loss.clip_eps is None, "magrpo.loss.clip_eps", m.loss.clip_eps,
            f"null for algorithm.name={a.name} (its loss has no probability ratio to clip)")
    d = a.dpo
    require(d.beta > 0, "algorithm.dpo.beta", d.beta, "a number > 0")
    require(d.pairs_per_node is None or d.pairs_per_node >= 1, "algorithm.dpo.pairs_per_node", d.pairs_per_node,
            "an integer >= 1 or null (every pair)")
    require(d.min_gap > 0, "algorithm.dpo.min_gap", d.min_gap, "a number > 0 (equal values carry no preference)")
    require(d.offline_pairs is None or a.name == "madpo", "algorithm.dpo.offline_pairs", d.offline_pairs,
            "null unless algorithm.name=madpo (offline DPO)")
    require(d.offline_pairs is None or Path(d.offline_pairs).is_file(), "algorithm.dpo.offline_pairs",
            d.offline_pairs, "an existing pairs file (scripts/export.py --pairs)")
    c = a.critic
    require(c.value_coef >= 0, "algorithm.critic.value_coef", c.value_coef, "a number >= 0")
    require(c.learning_rate is None or c.learning_rate > 0, "algorithm.critic.learning_rate", c.learning_rate,
            "a number > 0 or null (magrpo.learning_rate)")
    require(0.0 <= c.gae_lambda <= 1.0, "algorithm.critic.gae_lambda", c.gae_lambda, "a number in [0, 1]")


def _validate_model(cfg: RunConfig) -> None:
    mc, a, n = cfg.model, cfg.agents, cfg.magrpo.num_agents
    require(mc.max_new_tokens >= 1, "model.max_new_tokens", mc.max_new_tokens, "an integer >= 1")
    require(mc.max_prompt_tokens >= 16, "model.max_prompt_tokens", mc.max_prompt_tokens, "an integer >= 16")
    require(mc.temperature > 0, "model.temperature", mc.temperature, "a number > 0")
    require(0 < mc.top_p <= 1, "model.top_p", mc.top_p, "a number in (0, 1]")
    require(mc.top_k >= 0, "model.top_k", mc.top_k, "an integer >= 0 (0 = no top-k cut)")
    if a.mode == "full" and a.models is not None:
        require(len(a.models) == n, "agents.models", list(a.models), f"a list of {n} model names (one per agent)")
    require(a.lora.r >= 1, "agents.lora.r", a.lora.r, "an integer >= 1")
    tm = a.lora.target_modules
    require((isinstance(tm, str) and bool(tm.strip())) or (isinstance(tm, list) and bool(tm) and all(
        isinstance(x, str) and x for x in tm)), "agents.lora.target_modules", tm,
        "a list of module names, or one string as peft takes it (all-linear, or a regex over module names)")


def _validate_dataset(cfg: RunConfig) -> None:
    d = cfg.dataset
    require(d.name != "jsonl" or bool(d.path), "dataset.path", d.path, "a JSONL file when dataset.name=jsonl")
    require(d.name != "hf" or bool(d.path), "dataset.path", d.path,
            "a save_to_disk directory, a parquet/json/jsonl/csv file or a hub id when dataset.name=hf")
    f = d.fields
    for key, column, nullable in (("prompt", f.prompt, False), ("tests", f.tests, False),
                                  ("entry_point", f.entry_point, True), ("task_id", f.task_id, True)):
        require((column is None and nullable) or bool(str(column or "").strip()), f"dataset.fields.{key}", column,
                "a column name" + (" or null" if nullable else ""))
    if d.path and d.name not in ("jsonl", "hf"):
        raise ConfigError(f"config error: dataset.path={d.path!r} is set but dataset.name={d.name!r} ignores it; "
                          "set dataset.name=jsonl (HumanEval-format file) or hf (any table) to train on it, "
                          "or drop dataset.path")
    require(d.eval_size >= 0, "dataset.eval_size", d.eval_size, "an integer >= 0")
    require(d.max_problems is None or d.max_problems >= 1, "dataset.max_problems", d.max_problems,
            "an integer >= 1 or null")


def _validate_run(cfg: RunConfig) -> None:
    s, r, t, ev = cfg.sandbox, cfg.rollout, cfg.training, cfg.evaluation
    require(s.workers >= 0, "sandbox.workers", s.workers, "an integer >= 0 (0 = one per core)")
    require(s.timeout_s > 0, "sandbox.timeout_s", s.timeout_s, "a number > 0")
    require(s.memory_mb >= 64, "sandbox.memory_mb", s.memory_mb, "an integer >= 64")
    require(r.is_cap is None or r.is_cap >= 1.0, "rollout.is_cap", r.is_cap, "a number >= 1 or null")
    require(r.vllm.kv_cache_gib >= 1, "rollout.vllm.kv_cache_gib", r.vllm.kv_cache_gib, "an integer >= 1")
    require(0 < r.vllm.gpu_memory_utilization <= 1, "rollout.vllm.gpu_memory_utilization",
            r.vllm.gpu_memory_utilization, "a number in (0, 1]")
    require(r.server.url is None or r.server.url.startswith(("http://", "https://")), "rollout.server.url",
            r.server.url, "an http:// URL of a running comlrl-serve, or null (the trainer starts one)")
    require(r.server.start_timeout_s > 0, "rollout.server.start_timeout_s", r.server.start_timeout_s,
            "a number of seconds > 0")
    require(t.steps >= 0, "training.steps", t.steps, "an integer >= 0")
    require(t.trees_per_step >= 1, "training.trees_per_step", t.trees_per_step, "an integer >= 1")
    require(t.eval_every >= 0, "training.eval_every", t.eval_every, "an integer >= 0")
    require(t.save_every >= 0, "training.save_every", t.save_every, "an integer >= 0")
    require(t.torch_threads >= 0, "training.torch_threads", t.torch_threads, "an integer >= 0")
    require(bool(t.output_dir), "training.output_dir", t.output_dir, "a directory path")
    out = Path(t.output_dir).expanduser()  # a file on the way would fail the run's first write, after loading
    blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    require(blocker is None, "training.output_dir", t.output_dir, f"a directory path ({blocker} is a file)")
    require(ev.samples >= 0, "evaluation.samples", ev.samples, "an integer >= 0 (0 = greedy only)")
    require(ev.greedy or ev.samples > 0, "evaluation.greedy", ev.greedy,
            "true unless evaluation.samples > 0 (an evaluation needs greedy or sampled chains)")
    require(ev.probe_problems >= 0, "evaluation.probe_problems", ev.probe_problems, "an integer >= 0")
    for name, task_type in TASKS.table.items():  # every task's options section, not only the chosen one's
        options = vars(cfg.task).get(name)
        if options is not None and name != cfg.task.name:
            task_type.validate_options(options)


def resolved(cfg: RunConfig) -> RunConfig:
    """The config a run uses, as a new object (`cfg` is not changed): CoMLRL's joint-mode spellings as
    ours, `external.sandbox_slice` as a number (None: all asserts), and the chosen task's options with
    their run-dependent defaults (`Task.resolve_options`)."""
    m = cfg.magrpo
    task = cfg.task
    options = task.options()
    if options is not None:
        task = replace(task, **{task.name: TASKS.get(task.name).resolve_options(options, m.num_turns)})
    return replace(cfg, magrpo=replace(m, joint_mode=JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode)),
                   external=replace(cfg.external, sandbox_slice=normalize_slice(cfg.external.sandbox_slice)),
                   task=task)


def tree_joint_actions(joint_mode: str, num_generations: int, num_agents: int, num_turns: int) -> int:
    """Scored joint actions in one full tree (no early stop): per node G (align) or G^N (cross), and
    every joint action of turn t opens a node of turn t+1, so the sum over t of per_node**t."""
    per_node = num_generations ** num_agents if joint_mode == "cross" else num_generations
    return sum(per_node**t for t in range(1, num_turns + 1))


def validate_threshold(cfg: RunConfig, reward_range: tuple[float, float]) -> None:
    """The termination threshold is in raw reward units: refuse one the task's rewards can never pass."""
    thr = cfg.magrpo.early_termination_threshold
    lo, hi = reward_range
    if thr is not None and not (lo <= thr < hi):
        raise ConfigError(
            f"config error: magrpo.early_termination_threshold={thr!r} is not allowed; expected a number in "
            f"[{lo}, {hi}) (the reward range of task {cfg.task.name}) or null"
        )
