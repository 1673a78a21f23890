"""What the config schema's types cannot say and no one section can check alone: allowed values (read from
their owners), rules that span sections, and the defaults a run fills in. Each section's own ranges are its
`check()`, where the section is defined.

`validate(cfg)` only reads: it raises `ConfigError` naming the first bad key and changes nothing.
`resolved(cfg)` returns a new config with CoMLRL's spellings mapped to ours, `external.sandbox_slice`
as a number and each task's run-dependent option defaults filled in (`Task.resolve_options`).
The allowed values come from the code that owns them (`choices`), so a registered plugin name is allowed
like a built-in one.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from comlrl.config.registry import ALGORITHMS, ESTIMATORS, LOSSES, REWARDS, TASKS, TRANSITIONS
from comlrl.engines import ENGINES
from comlrl.errors import ConfigError, not_allowed, require
from comlrl.learn.advantages import CREDITS, SCALES
from comlrl.learn.preference import SELECTIONS
from comlrl.models import AGENT_MODES, DTYPES
from comlrl.tasks.datasets import DATASET_NAMES
from comlrl.tasks.reward_funcs import validate_specs
from comlrl.tree.nodes import JOINT_MODES
from feedback.context import CONTEXTS, SLICE_OF, normalize_slice
from sandbox.isolation import LEVELS as ISOLATION_LEVELS

if TYPE_CHECKING:
    from comlrl.config.sections import RunConfig

__all__ = ["AGENT_MODES", "JOINT_MODE_ALIASES", "LR_SCHEDULES", "algorithm_sections", "choices", "normalize_slice",
           "resolved", "tree_joint_actions", "validate", "validate_threshold"]

log = logging.getLogger("comlrl")

CROSS_TREE_WARN = 1000  # scored joint actions per tree above which a cross-mode run is warned about
LR_SCHEDULES = ("constant", "linear", "cosine")  # magrpo.lr_schedule: comlrl/run/components.py maps each
                                                 # to transformers'
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


def chosen(cfg: RunConfig, key: str) -> Any:
    """The value at a dotted key of `choices` (the joint mode as stored: aliases mapped)."""
    value: Any = cfg
    for part in key.split("."):
        value = getattr(value, part)
    return JOINT_MODE_ALIASES.get(value, value) if key == "magrpo.joint_mode" else value


def validate(cfg: RunConfig) -> None:
    """Check values the schema's types cannot express; raises ConfigError naming the first bad key. Reads
    `cfg` only (`resolved` makes the config a run uses)."""
    for key, allowed in choices().items():
        value = chosen(cfg, key)
        require(value in allowed, key, value, "one of: " + ", ".join(allowed))
    task_type = TASKS.get(cfg.task.name)
    validate_specs(cfg.task.reward_funcs, cfg.task.reward_weights)
    if cfg.task.options() is not None:  # before the agent count: task.text.roles gives the text task's
        task_type.validate_options(cfg.task.options())
    roles = task_type.agents_for(cfg.task)
    if ALGORITHMS.get(cfg.algorithm.name).centralized:  # one policy writes every role's part
        require(task_type.centralizable and roles >= 2, "algorithm.name", cfg.algorithm.name,
                f"a task whose agents write parts of one answer (code_collab, code_coop, text with 2+ roles), "
                f"not task.name={cfg.task.name}")
    for section in (cfg.magrpo, cfg.model, cfg.agents, cfg.dataset, cfg.rollout, cfg.training,
                    cfg.evaluation):  # each section's own rules, where the section is defined
        section.check()
    for key, _ in algorithm_sections():  # the registered algorithms' option sections (algorithm.<key>.*)
        vars(cfg.algorithm)[key].check()
    _validate_magrpo(cfg, agents=1 if ALGORITHMS.get(cfg.algorithm.name).centralized else roles)
    _validate_algorithm(cfg)
    normalize_slice(cfg.external.sandbox_slice)
    _validate_agents(cfg)
    _validate_sandbox(cfg)
    _validate_task_options(cfg)
    _validate_flat(cfg)


def check_runnable(cfg: RunConfig) -> None:
    """What a run needs that a config still being built may lack (the Python API adds reward functions to a
    loaded config): checked by `comlrl-train` at load, `--print-config` included, and by `train()`."""
    if TASKS.get(cfg.task.name).needs_reward_funcs and not cfg.task.reward_funcs:
        raise ConfigError(f"config error: task.reward_funcs=[] is not allowed; expected at least one module:function "
                          f"for task.name={cfg.task.name} (its reward comes only from them)")


def _validate_magrpo(cfg: RunConfig, agents: int) -> None:
    """magrpo.* against the registries, the task's agent count and the tree's size."""
    m, loss = cfg.magrpo, cfg.magrpo.loss
    for key, name, needs in (("magrpo.advantage.baseline", m.advantage.baseline,
                              ESTIMATORS.get(m.advantage.baseline).needs),
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
    """algorithm.* against the chosen algorithm's needs and magrpo.*."""
    a, m = cfg.algorithm, cfg.magrpo
    algo = ALGORITHMS.get(a.name)
    require(m.num_generations >= algo.min_generations, "magrpo.num_generations", m.num_generations,
            f"an integer >= {algo.min_generations} for algorithm.name={a.name}")
    require(algo.on_policy or m.loss.clip_eps is None, "magrpo.loss.clip_eps", m.loss.clip_eps,
            f"null for algorithm.name={a.name} (its loss has no probability ratio to clip)")
    require(a.dpo.offline_pairs is None or a.name == "madpo", "algorithm.dpo.offline_pairs", a.dpo.offline_pairs,
            "null unless algorithm.name=madpo (offline DPO)")
    # a pairs file is no round: nothing to label, nothing earlier to replay
    require(a.dpo.offline_pairs is None or a.dpo.comparator == "task", "algorithm.dpo.comparator", a.dpo.comparator,
            "task with algorithm.dpo.offline_pairs (its pairs are labeled already)")
    require(a.dpo.offline_pairs is None or a.dpo.replay == "current", "algorithm.dpo.replay", a.dpo.replay,
            "current with algorithm.dpo.offline_pairs (a pairs file is one pass, not rounds)")
    require(a.marlhf.pairs_file is None or a.marlhf.comparator == "task", "algorithm.marlhf.comparator",
            a.marlhf.comparator, "task with algorithm.marlhf.pairs_file (its pairs are labeled already)")
    require(a.marlhf.pairs_file is None or a.marlhf.replay == "current", "algorithm.marlhf.replay", a.marlhf.replay,
            "current with algorithm.marlhf.pairs_file (a pairs file is one pass, not rounds)")
    require(a.critic.kind == "v" or algo.critic, "algorithm.critic.kind", a.critic.kind,
            f"v unless algorithm.name is iac or maac (algorithm.name={a.name} has no critic)")
    require(a.critic.kind == "v" or a.name != "maac" or JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode) == "align",
            "algorithm.critic.kind", a.critic.kind, "v with magrpo.joint_mode=cross (maac's Q is of the joint actions "
            "of align mode: the g-th completion of every agent)")
    require(a.name != "marlhf" or JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode) == "align", "magrpo.joint_mode",
            m.joint_mode, "align for algorithm.name=marlhf (its reward heads score the joint actions of align mode)")
    require(cfg.rollout.atropos.url is None or a.name == "magrpo", "algorithm.name", a.name,
            "magrpo with rollout.atropos.url (an Atropos group is a sibling group of the policy gradient; "
            "the other families need the tree)")
    per_group = m.advantage.train_per_group
    if per_group is not None:  # a share of each tree group trains (comlrl/learn/subsample.py)
        require(a.name in ("magrpo", "centralized"), "magrpo.advantage.train_per_group", per_group,
                f"null for algorithm.name={a.name} (only magrpo and centralized train sibling groups' advantages)")
        require(m.loss.kl_coef == 0, "magrpo.advantage.train_per_group", per_group,
                "null with magrpo.loss.kl_coef > 0 (the KL term of an untrained completion would be lost)")
        require(cfg.rollout.atropos.url is None, "magrpo.advantage.train_per_group", per_group,
                "null with rollout.atropos.url (Atropos's groups train whole)")


def _validate_agents(cfg: RunConfig) -> None:
    a, n = cfg.agents, cfg.magrpo.num_agents
    if a.mode == "full" and a.models is not None:
        require(len(a.models) == n, "agents.models", list(a.models), f"a list of {n} model names (one per agent)")


def _validate_sandbox(cfg: RunConfig) -> None:
    """sandbox.* (its section lives in sandbox/, which imports nothing of comlrl: its rules are kept here)."""
    s = cfg.sandbox
    require(s.workers >= 0, "sandbox.workers", s.workers, "an integer >= 0 (0 = one per core)")
    require(s.timeout_s > 0, "sandbox.timeout_s", s.timeout_s, "a number > 0")
    require(s.memory_mb >= 64, "sandbox.memory_mb", s.memory_mb, "an integer >= 64")


def _validate_flat(cfg: RunConfig) -> None:
    """rollout.shape=flat credits every later move with its episode's advantage from the root's group, which is one
    side's view: a game where one policy plays several seats (self-play) needs the tree's per-seat credit."""
    if cfg.rollout.shape == "tree" and cfg.task.name == "openenv":
        raise not_allowed("rollout.shape", "tree", "flat for task.name=openenv (an OpenEnv session's state lives "
                                                   "on its server and cannot be copied: a seed's episodes are "
                                                   "independent)")
    if cfg.rollout.shape == "tree" and cfg.task.name == "verifiers":
        raise not_allowed("rollout.shape", "tree", "flat for task.name=verifiers (an episode is the environment's "
                                                   "own rollout coroutine, which cannot be copied: a row's episodes "
                                                   "are independent)")
    if cfg.rollout.shape == "flat" and cfg.task.name == "textarena":
        from comlrl.tasks.games.seats import self_play

        require(not self_play(cfg.task.textarena.seats), "rollout.shape", "flat",
                "tree for self-play (task.textarena.seats gives one agent several seats: each move needs its own "
                "seat's credit, which flat episodes do not give)")


def _validate_task_options(cfg: RunConfig) -> None:
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
        task = replace(task, **{task.name: TASKS.get(task.name).resolve_options(options, m.num_turns,
                                                                                     cfg.model.name)})
    return replace(cfg, magrpo=replace(m, joint_mode=JOINT_MODE_ALIASES.get(m.joint_mode, m.joint_mode)),
                   external=replace(cfg.external, sandbox_slice=normalize_slice(cfg.external.sandbox_slice)),
                   task=task)


def algorithm_sections() -> tuple[tuple[str, type], ...]:
    """(key, options type) of every registered algorithm that declares options, once per key (iac and maac
    share `algorithm.critic`); a key taken by two different types is an error."""
    out: dict[str, type] = {}
    for name, algo in ALGORITHMS.table.items():
        if algo.options is None:
            continue
        key, options_type = algo.options
        if key == "name" or out.get(key, options_type) is not options_type:
            raise ConfigError(f"config error: algorithm {name!r} cannot have options algorithm.{key}: the key is "
                              "taken")
        out[key] = options_type
    return tuple(out.items())


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
