"""One structured config for a whole run, validated at load time.

`load_config(path, overrides)` merges a YAML file and `key=value` overrides onto the dataclass schema
below. Any unknown key, wrong type or impossible value raises `ConfigError` with one line that names the
key and what is allowed, so a bad run fails before it loads a model.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from comlrl.config_tasks import ActionsTaskConfig, TextTaskConfig, ToolAgentConfig

EMBEDDED_MODEL = "smollm2-135m-instruct"
CROSS_TREE_WARN = 1000  # scored joint actions per tree above which a cross-mode run is warned about

log = logging.getLogger("comlrl")


class ConfigError(ValueError):
    """A bad config value; the message is one line naming the key."""


@dataclass
class LoraConfig:
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    # a list of module names, or one string as peft takes it: "all-linear" or a regex over module names
    target_modules: Any = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


@dataclass
class ModelConfig:
    name: str = EMBEDDED_MODEL  # alias, local HF dir, .gguf file, or hub id (when online)
    dtype: str = "float32"  # float32 | bfloat16
    cache_dir: str | None = None  # where converted models live; default ~/.cache/comlrl/models
    max_prompt_tokens: int = 768
    max_new_tokens: int = 160
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 50  # transformers' default, explicit so a library default cannot move it; 0 = off
    gradient_checkpointing: bool = False


@dataclass
class AgentsConfig:
    mode: str = "lora"  # lora: one frozen base + one adapter per agent | full: a full model per agent
    models: list[str] | None = None  # full mode only: one model name per agent (heterogeneous agents)
    lora: LoraConfig = field(default_factory=LoraConfig)


@dataclass
class DatasetFieldsConfig:
    """dataset.name=hf: the column holding each part of a problem (comlrl/tasks/hf_dataset.py)."""

    prompt: str = "prompt"
    entry_point: str | None = "entry_point"  # null: the first function the tests call (MBPP)
    tests: str = "test"  # a test string, or a list of assert strings (MBPP's test_list)
    task_id: str | None = "task_id"  # null: the row number


@dataclass
class DatasetConfig:
    name: str = "easy"  # easy | humaneval | jsonl | hf | coop (task code_coop)
    path: str | None = None  # jsonl: file in HumanEval format; hf: saved dir, parquet/json/jsonl/csv, hub id
    eval_size: int = 8
    max_problems: int | None = None
    seed: int = 0
    split: str = "train"  # hf: the split of a saved DatasetDict or hub id
    fields: DatasetFieldsConfig = field(default_factory=DatasetFieldsConfig)


@dataclass
class TaskConfig:
    name: str = "code_collab"  # code_collab | code_coop (N=2) | code_single | tool_agent (N=1) | actions (N=2) | registered
    reward: str = "levels"  # code tasks: levels (docs/rewards.md) | a reward registered by a plugins module
    reward_funcs: list[str] = field(default_factory=list)  # module:function, TRL-style (comlrl/reward_funcs.py)
    reward_weights: list[float] | None = None  # one per reward function; null = 1 each
    actions: ActionsTaskConfig = field(default_factory=ActionsTaskConfig)
    tool_agent: ToolAgentConfig = field(default_factory=ToolAgentConfig)
    text: TextTaskConfig = field(default_factory=TextTaskConfig)


@dataclass
class AdvantageConfig:
    credit: str = "mean"  # cross mode: mean | sum (CoMLRL) of the returns of a completion's joint actions
    baseline: str = "mean"  # mean | loo | max | none
    scale: str = "group"  # group (divide by sibling std) | none (Dr.GRPO)
    eps: float = 1e-6


@dataclass
class LossConfig:
    aggregation: str = "token_mean"  # token_mean | seq_mean | seq_sum (CoMLRL)
    clip_eps: float | None = None  # PPO ratio clip; needed for inner_epochs > 1
    inner_epochs: int = 1
    kl_coef: float = 0.0  # KL to the base model (adapters off)
    micro_batch_size: int = 4  # activations dominate peak memory (~0.5 GB per 500-token sample, float32)


@dataclass
class MagrpoConfig:
    num_agents: int = 2
    num_turns: int = 2
    num_generations: int = 4
    joint_mode: str = "align"  # align (G joint actions per node) | cross (G^N); CoMLRL's aligned / crossed too
    early_termination_threshold: float | None = None  # raw reward units; null disables
    discount: float = 1.0
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    learning_rate: float = 2e-4
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    warmup_steps: int = 0
    lr_schedule: str = "constant"  # constant | linear | cosine (after warmup)


@dataclass
class ExternalConfig:
    mode: str = "level_feedback"  # level_feedback | level_passed | passed | plain | expert_edits | registered
    sandbox_slice: Any = 1  # 1 first assert, n>0 first n, 0/null/'all' all, n<0 last |n|
    sandbox_slice_of: str = "tests"  # tests: slice all eval asserts (with outcomes) | failing: only failing ones
    passed_context: str = "minimal"  # passed/level_passed: minimal (own code + outcome) | full (+ teammates, history)
    include_original_prompt: bool = True
    include_history: bool = True
    expert_edits_model: str = "deepseek:deepseek-coder"
    expert_fallback: str = "level_feedback"
    expert_timeout_s: float = 60.0
    expert_max_retries: int = 3  # the SDK's transport retries, and retries of a reply that does not parse
    expert_concurrency: int = 4
    expert_max_tokens: int = 512
    expert_cache_dir: str | None = None  # null = ~/.cache/comlrl/expert_edits, "off" disables


@dataclass
class SandboxConfig:
    workers: int = 0  # 0 = one per core
    timeout_s: float = 5.0
    memory_mb: int = 512
    isolation: str = "auto"  # auto | bwrap | unshare | subprocess
    cache: bool = True


@dataclass
class VLLMSettings:
    enforce_eager: bool = True  # skip vLLM's compile step (start-up ~20 s instead of ~100 s on 2 CPU cores)
    kv_cache_gib: int = 2  # CPU build: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE, unless that is set)
    gpu_memory_utilization: float = 0.3  # CUDA build: share of GPU memory for weights + KV cache
    sleep_between_rollouts: bool = True  # CUDA build: offload weights and free the KV cache during updates


@dataclass
class RolloutConfig:
    engine: str = "hf"  # hf (transformers generate, the reference) | vllm (falls back to hf if it cannot start)
    # truncated importance sampling: each token's loss is weighted by min(pi_train / pi_engine, cap) when
    # the engine's log-probs differ from the trainer's (vllm); null = no correction (the gap is still logged)
    is_cap: float | None = 2.0
    vllm: VLLMSettings = field(default_factory=VLLMSettings)


@dataclass
class TrainingConfig:
    steps: int = 8
    trees_per_step: int = 1  # trees (problems) per rank per optimizer step
    eval_every: int = 0  # 0 = only before and after training
    eval_size: int | None = None  # cap on eval problems; null = whole eval split
    save_every: int = 0  # 0 = only at the end
    output_dir: str = "runs/latest"
    seed: int = 0
    resume: bool = False
    overwrite: bool = False  # reuse an output_dir that holds an earlier run's outputs (they are replaced)
    torch_threads: int = 0  # 0 = the cores this process may use / local processes


@dataclass
class EvaluationConfig:
    """How learning is measured (comlrl/evaluation.py): each problem gets one greedy chain and `samples`
    chains sampled at model.temperature from `seed`, on the held-out set and on a probe of the problems the
    run trains on; before and after are compared problem by problem (comlrl/paired.py)."""

    samples: int = 4  # sampled chains per problem, on every set (0 = greedy only)
    greedy: bool = True  # also one greedy chain per problem (eval/pass_at_1)
    probe_problems: int = 8  # the first distinct training problems the run's steps draw (0 = no probe)
    seed: int = 1234  # every evaluation samples from this seed: the same draws for the same weights


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "comlrl"
    progress_bar: bool = True


@dataclass
class RunConfig:
    plugins: list[str] = field(default_factory=list)  # user modules imported before validation (comlrl.registry)
    model: ModelConfig = field(default_factory=ModelConfig)
    agents: AgentsConfig = field(default_factory=AgentsConfig)
    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    magrpo: MagrpoConfig = field(default_factory=MagrpoConfig)
    external: ExternalConfig = field(default_factory=ExternalConfig)
    sandbox: SandboxConfig = field(default_factory=SandboxConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)


CHOICES: dict[str, tuple[str, ...]] = {
    "model.dtype": ("float32", "bfloat16"),
    "agents.mode": ("lora", "full"),
    "dataset.name": ("easy", "humaneval", "jsonl", "hf", "coop"),
    "magrpo.joint_mode": ("align", "cross"),
    "magrpo.advantage.credit": ("mean", "sum"),
    "magrpo.advantage.baseline": ("mean", "loo", "max", "none"),
    "magrpo.advantage.scale": ("group", "none"),
    "magrpo.loss.aggregation": ("token_mean", "seq_mean", "seq_sum"),
    "magrpo.lr_schedule": ("constant", "linear", "cosine"),
    "external.sandbox_slice_of": ("tests", "failing"),
    "external.passed_context": ("minimal", "full"),
    "sandbox.isolation": ("auto", "bwrap", "unshare", "subprocess"),
    "rollout.engine": ("hf", "vllm"),
}

# CoMLRL's spellings, accepted and stored as ours.
JOINT_MODE_ALIASES = {"aligned": "align", "crossed": "cross"}


def choices() -> dict[str, tuple[str, ...]]:
    """Allowed values per key: the fixed `CHOICES` and the registries' names (built-ins and plugins')."""
    from comlrl.registry import REWARDS, TASKS, TRANSITIONS
    modes = TRANSITIONS.names()  # + expert_edits: the expert's replies, or else the fallback mode's prompt
    return {**CHOICES, "task.name": TASKS.names(), "task.reward": REWARDS.names(),
            "external.mode": (*modes, "expert_edits"), "external.expert_fallback": modes}


def _get(cfg: RunConfig, dotted: str) -> Any:
    obj: Any = cfg
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _require(ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"config error: {key}={value!r} is not allowed; expected {allowed}")


def normalize_slice(value: Any) -> int | None:
    """`external.sandbox_slice` as an int (first n / last |n|) or None for all asserts."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("all", "none", "null")):
        return None
    try:
        n = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else None
    except ValueError:
        n = None
    _require(n is not None, "external.sandbox_slice", value, "an integer, 0, 'all' or null")
    return None if n == 0 else n


def validate(cfg: RunConfig) -> RunConfig:
    """Check values the schema's types cannot express; raises ConfigError naming the first bad key."""
    cfg.magrpo.joint_mode = JOINT_MODE_ALIASES.get(cfg.magrpo.joint_mode, cfg.magrpo.joint_mode)
    for key, allowed in choices().items():
        value = _get(cfg, key)
        _require(value in allowed, key, value, "one of: " + ", ".join(allowed))
    from comlrl.registry import TASKS
    task_type = TASKS.get(cfg.task.name)
    from comlrl.config_tasks import validate_rewards
    validate_rewards(cfg)  # before the agent count: task.text.roles gives the text task's
    m = cfg.magrpo
    _require(m.num_agents >= 1, "magrpo.num_agents", m.num_agents, "an integer >= 1")
    _require(m.num_turns >= 1, "magrpo.num_turns", m.num_turns, "an integer >= 1")
    _require(m.num_generations >= 2, "magrpo.num_generations", m.num_generations,
             "an integer >= 2 (advantages compare siblings)")
    _require(0.0 <= m.discount <= 1.0, "magrpo.discount", m.discount, "a number in [0, 1]")
    _require(m.learning_rate > 0, "magrpo.learning_rate", m.learning_rate, "a number > 0")
    _require(m.max_grad_norm > 0, "magrpo.max_grad_norm", m.max_grad_norm, "a number > 0")
    _require(m.warmup_steps >= 0, "magrpo.warmup_steps", m.warmup_steps, "an integer >= 0")
    thr = m.early_termination_threshold
    _require(thr is None or math.isfinite(thr), "magrpo.early_termination_threshold", thr, "a finite number or null")
    loss = m.loss
    _require(loss.inner_epochs >= 1, "magrpo.loss.inner_epochs", loss.inner_epochs, "an integer >= 1")
    _require(loss.clip_eps is None or loss.clip_eps > 0, "magrpo.loss.clip_eps", loss.clip_eps, "a number > 0 or null")
    _require(loss.inner_epochs == 1 or loss.clip_eps is not None, "magrpo.loss.inner_epochs", loss.inner_epochs,
             "1 unless magrpo.loss.clip_eps is set (several epochs need the ratio clip)")
    _require(loss.kl_coef >= 0, "magrpo.loss.kl_coef", loss.kl_coef, "a number >= 0")
    _require(loss.micro_batch_size >= 1, "magrpo.loss.micro_batch_size", loss.micro_batch_size, "an integer >= 1")
    _require(m.advantage.eps > 0, "magrpo.advantage.eps", m.advantage.eps, "a number > 0")
    want = task_type.agents_for(cfg.task)
    _require(m.num_agents == want, "magrpo.num_agents", m.num_agents, f"{want} for task.name={cfg.task.name}")
    if m.joint_mode == "cross":
        per_node = m.num_generations ** m.num_agents
        _require(per_node <= 4096, "magrpo.num_generations", m.num_generations,
                 f"a value with num_generations**num_agents <= 4096 in cross mode (got {per_node})")
        total = tree_joint_actions(m.joint_mode, m.num_generations, m.num_agents, m.num_turns)
        if total > CROSS_TREE_WARN:
            log.warning("magrpo.joint_mode=cross: %d^%d = %d joint actions per node make a %d-turn tree of up to %d "
                        "scored joint actions (> %d); expect slow steps, or lower num_generations/num_turns",
                        m.num_generations, m.num_agents, per_node, m.num_turns, total, CROSS_TREE_WARN)
    cfg.external.sandbox_slice = normalize_slice(cfg.external.sandbox_slice)
    mc = cfg.model
    _require(mc.max_new_tokens >= 1, "model.max_new_tokens", mc.max_new_tokens, "an integer >= 1")
    _require(mc.max_prompt_tokens >= 16, "model.max_prompt_tokens", mc.max_prompt_tokens, "an integer >= 16")
    _require(mc.temperature > 0, "model.temperature", mc.temperature, "a number > 0")
    _require(0 < mc.top_p <= 1, "model.top_p", mc.top_p, "a number in (0, 1]")
    _require(mc.top_k >= 0, "model.top_k", mc.top_k, "an integer >= 0 (0 = no top-k cut)")
    a = cfg.agents
    if a.mode == "full" and a.models is not None:
        _require(len(a.models) == m.num_agents, "agents.models", list(a.models),
                 f"a list of {m.num_agents} model names (one per agent)")
    _require(a.lora.r >= 1, "agents.lora.r", a.lora.r, "an integer >= 1")
    tm = a.lora.target_modules
    _require((isinstance(tm, str) and bool(tm.strip())) or (isinstance(tm, list) and bool(tm) and all(
        isinstance(x, str) and x for x in tm)), "agents.lora.target_modules", tm,
        "a list of module names, or one string as peft takes it (all-linear, or a regex over module names)")
    d = cfg.dataset
    _require(d.name != "jsonl" or bool(d.path), "dataset.path", d.path, "a JSONL file when dataset.name=jsonl")
    _require(d.name != "hf" or bool(d.path), "dataset.path", d.path,
             "a save_to_disk directory, a parquet/json/jsonl/csv file or a hub id when dataset.name=hf")
    for key in ("prompt", "tests", "entry_point", "task_id"):
        column = getattr(d.fields, key)
        nullable = key in ("entry_point", "task_id")
        _require((column is None and nullable) or bool(str(column or "").strip()), f"dataset.fields.{key}", column,
                 "a column name" + (" or null" if nullable else ""))
    if d.path and d.name not in ("jsonl", "hf"):
        raise ConfigError(f"config error: dataset.path={d.path!r} is set but dataset.name={d.name!r} ignores it; "
                          "set dataset.name=jsonl (HumanEval-format file) or hf (any table) to train on it, "
                          "or drop dataset.path")
    _require(d.eval_size >= 0, "dataset.eval_size", d.eval_size, "an integer >= 0")
    _require(d.max_problems is None or d.max_problems >= 1, "dataset.max_problems", d.max_problems,
             "an integer >= 1 or null")
    s = cfg.sandbox
    _require(s.workers >= 0, "sandbox.workers", s.workers, "an integer >= 0 (0 = one per core)")
    _require(s.timeout_s > 0, "sandbox.timeout_s", s.timeout_s, "a number > 0")
    _require(s.memory_mb >= 64, "sandbox.memory_mb", s.memory_mb, "an integer >= 64")
    r = cfg.rollout
    _require(r.is_cap is None or r.is_cap >= 1.0, "rollout.is_cap", r.is_cap, "a number >= 1 or null")
    _require(r.vllm.kv_cache_gib >= 1, "rollout.vllm.kv_cache_gib", r.vllm.kv_cache_gib, "an integer >= 1")
    _require(0 < r.vllm.gpu_memory_utilization <= 1, "rollout.vllm.gpu_memory_utilization",
             r.vllm.gpu_memory_utilization, "a number in (0, 1]")
    t = cfg.training
    _require(t.steps >= 0, "training.steps", t.steps, "an integer >= 0")
    _require(t.trees_per_step >= 1, "training.trees_per_step", t.trees_per_step, "an integer >= 1")
    _require(t.eval_every >= 0, "training.eval_every", t.eval_every, "an integer >= 0")
    _require(t.save_every >= 0, "training.save_every", t.save_every, "an integer >= 0")
    _require(t.torch_threads >= 0, "training.torch_threads", t.torch_threads, "an integer >= 0")
    _require(bool(t.output_dir), "training.output_dir", t.output_dir, "a directory path")
    out = Path(t.output_dir).expanduser()  # a file on the way would fail the run's first write, after loading
    blocker = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    _require(blocker is None, "training.output_dir", t.output_dir, f"a directory path ({blocker} is a file)")
    ev = cfg.evaluation
    _require(ev.samples >= 0, "evaluation.samples", ev.samples, "an integer >= 0 (0 = greedy only)")
    _require(ev.greedy or ev.samples > 0, "evaluation.greedy", ev.greedy,
             "true unless evaluation.samples > 0 (an evaluation needs greedy or sampled chains)")
    _require(ev.probe_problems >= 0, "evaluation.probe_problems", ev.probe_problems, "an integer >= 0")
    ta = cfg.task.tool_agent
    _require(ta.format_weight >= 0, "task.tool_agent.format_weight", ta.format_weight, "a number >= 0")
    _require(ta.fake_response_penalty >= 0, "task.tool_agent.fake_response_penalty", ta.fake_response_penalty,
             "a number >= 0")
    _require(ta.max_output_chars >= 50, "task.tool_agent.max_output_chars", ta.max_output_chars, "an integer >= 50")
    _require(ta.show_failed >= 0, "task.tool_agent.show_failed", ta.show_failed, "an integer >= 0")
    _validate_actions(cfg)
    return cfg


def _validate_actions(cfg: RunConfig) -> None:
    """task.actions.*: numbers in range; max_turns null resolves to magrpo.num_turns."""
    a = cfg.task.actions
    _require(bool(str(a.judge).strip()), "task.actions.judge", a.judge, "rule or a judge spec like openai:<model>")
    for key in ("judge_reward", "weight_completion", "weight_quality", "weight_efficiency", "weight_creativity",
                "action_reward", "format_penalty"):
        value = getattr(a, key)
        _require(math.isfinite(value) and value >= 0, f"task.actions.{key}", value, "a finite number >= 0")
    weights = a.weight_completion + a.weight_quality + a.weight_efficiency + a.weight_creativity
    _require(weights > 0 or a.judge_reward == 0, "task.actions.weight_completion", a.weight_completion,
             "weights with a positive sum (or task.actions.judge_reward=0)")
    _require(a.max_actions_per_turn >= 1, "task.actions.max_actions_per_turn", a.max_actions_per_turn,
             "an integer >= 1")
    _require(a.max_turns is None or a.max_turns >= 1, "task.actions.max_turns", a.max_turns, "an integer >= 1 or null")
    _require(a.judge_timeout_s > 0, "task.actions.judge_timeout_s", a.judge_timeout_s, "a number > 0")
    _require(a.judge_max_retries >= 0, "task.actions.judge_max_retries", a.judge_max_retries, "an integer >= 0")
    _require(a.judge_max_tokens >= 16, "task.actions.judge_max_tokens", a.judge_max_tokens, "an integer >= 16")
    _require(a.judge_prompt is None or str(a.judge).strip() != "rule", "task.actions.judge_prompt", a.judge_prompt,
             "null with task.actions.judge=rule (the rule-based judge reads no prompt)")
    if cfg.task.name == "actions" and a.max_turns is None:
        a.max_turns = cfg.magrpo.num_turns


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


def _one_line(exc: OmegaConfBaseException) -> str:
    key = getattr(exc, "full_key", None)
    msg = str(exc).splitlines()[0].strip()
    return f"config error: {key}: {msg}" if key else f"config error: {msg}"


def _blame(exc: OmegaConfBaseException, base: list[DictConfig], overrides: list[str] | tuple[str, ...]) -> str:
    """Name the key: OmegaConf leaves it out when a whole section is replaced by a scalar."""
    if getattr(exc, "full_key", None) or not overrides:
        return _one_line(exc)
    for item in overrides:
        try:
            OmegaConf.to_object(OmegaConf.merge(*base, OmegaConf.from_dotlist([item])))
        except OmegaConfBaseException as one:
            key = item.split("=", 1)[0]
            return f"config error: {key}: {str(one).splitlines()[0].strip()}"
    return _one_line(exc)


def load_config(path: str | Path | RunConfig | None = None, overrides: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """Merge schema defaults, a YAML file (or a `RunConfig`, e.g. one this returned) and dotlist overrides,
    then validate; a `RunConfig` passed in is not changed."""
    schema = OmegaConf.structured(RunConfig)
    layers: list[DictConfig] = [schema]
    if isinstance(path, RunConfig):
        layers.append(OmegaConf.structured(path))
    elif path is not None:
        p = Path(path)
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
        layers.append(loaded)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"config error: override {item!r} is not of the form key=value")
    try:
        if overrides:
            layers.append(OmegaConf.from_dotlist(list(overrides)))
        merged = OmegaConf.merge(*layers)
        cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise ConfigError(_blame(exc, layers[:-1] if overrides else layers, overrides)) from None
    assert isinstance(cfg, RunConfig)
    from comlrl.registry import import_plugins
    import_plugins(cfg.plugins)  # before validation: plugins register the names the config may choose
    return validate(cfg)


def schema_keys(obj: Any = None, prefix: str = "") -> list[tuple[str, Any]]:
    """Every dotted key of the schema with its default, in schema order (for --help and docs checks)."""
    from dataclasses import fields, is_dataclass

    obj = RunConfig() if obj is None else obj
    out: list[tuple[str, Any]] = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if is_dataclass(value):
            out.extend(schema_keys(value, f"{prefix}{f.name}."))
        else:
            out.append((f"{prefix}{f.name}", value))
    return out


def to_yaml(cfg: RunConfig) -> str:
    """The resolved config as YAML, loadable again by `load_config`."""
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
