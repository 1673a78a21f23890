"""CoMLRL 1.4.3's MAGRPOTrainer interface on this engine (comlrl/trainers/, docs/comlrl-compat.md): every field of
its MAGRPOConfig is accepted and becomes what the doc says, fields without meaning here warn once, what would
silently change training is refused, and scripts written in that library's style train unchanged (slow tests,
on the tiny test model)."""

from __future__ import annotations

import gc
import json
import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from comlrl.errors import ConfigError
from comlrl.trainers.callbacks import CallbackError, Formatter, RewardCall, TransitionCall, formatters_for
from comlrl.trainers.mapping import NO_MEANING, field_names

ROOT = Path(__file__).resolve().parents[1]
# CoMLRL 1.4.3's MAGRPOConfig, field by field with its default (comlrl/trainers/reinforce/magrpo.py of that wheel)
FIELDS_143: dict[str, Any] = {
    "num_train_epochs": 20, "agent_learning_rate": 5.0e-6, "logging_steps": 50, "num_agents": 2,
    "parallel_training": "none", "agent_devices": None, "num_generations": 4, "max_new_tokens": 256,
    "temperature": 0.6, "top_p": 0.6, "top_k": 50, "num_turns": 2, "discount": 1.0, "joint_mode": "aligned",
    "early_termination_threshold": -0.2, "external_prompt_passthrough": False, "eval_interval": 16,
    "eval_num_samples": 4, "eval_batch_size": 1, "rollout_buffer_size": 2, "train_batch_size": None,
    "advantage_normalization": True, "advantage_mode": "mean", "reference_kl_enabled": False,
    "reference_kl_coef": 0.1, "reference_devices": None,
}
TRAIN = [{"prompt": f"def f{i}(x):", "entry_point": f"f{i}", "test": f"assert f{i}(1) == 1"} for i in range(3)]
EVAL = [{"prompt": f"def g{i}(x):", "entry_point": f"g{i}", "test": ""} for i in range(5)]


def reward_two(aux: list[str], main: list[str], batch_items: list[dict] | None = None) -> list[float]:
    return [float(len(aux[0]) > 0) + float(batch_items[0]["entry_point"] in main[0])]


def transition_three(prompt: str, agent_completions: list[str], num_agents: int) -> list[str]:
    return [f"revise {prompt}"] * num_agents


def trainer(**kw: Any) -> Any:
    """A trainer over tiny-random built from MAGRPOConfig(**kw) (nothing is loaded: names resolve at train())."""
    from comlrl.trainers import MAGRPOConfig, MAGRPOTrainer

    extra = {k: kw.pop(k) for k in ("eval_dataset", "external_transition", "model_config", "overrides") if k in kw}
    extra.setdefault("external_transition", transition_three)
    return MAGRPOTrainer(agent_model="tiny-random", num_agents=2, reward_func=reward_two, train_dataset=TRAIN,
                         args=MAGRPOConfig(**kw), **extra)


def key(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = vars(cfg)[part]
    return cfg


# ---------------------------------------------------------------------------------------------- pure (no model)

def test_every_field_of_1_4_3_is_there_with_its_default_and_nothing_else() -> None:
    from comlrl.trainers import MAGRPOConfig

    assert {f.name: f.default for f in fields(MAGRPOConfig)} == FIELDS_143
    assert field_names() == list(FIELDS_143)


def test_the_three_import_paths_give_the_same_classes() -> None:
    import comlrl.trainers as top
    from comlrl.trainers import magrpo as old
    from comlrl.trainers.reinforce import magrpo as new

    assert old.MAGRPOTrainer is new.MAGRPOTrainer is top.MAGRPOTrainer
    assert old.MAGRPOConfig is new.MAGRPOConfig is top.MAGRPOConfig


def test_every_field_set_away_from_its_default_is_accepted() -> None:
    cfg = trainer(num_train_epochs=2, agent_learning_rate=1e-5, logging_steps=3, num_agents=2, parallel_training="mp",
                  agent_devices=["cpu", "cpu"], num_generations=3, max_new_tokens=32, temperature=0.9, top_p=0.95,
                  top_k=None, num_turns=3, discount=0.9, joint_mode="cross", early_termination_threshold=None,
                  external_prompt_passthrough=True, eval_interval=2, eval_num_samples=1, eval_batch_size=2,
                  rollout_buffer_size=4, train_batch_size=2, advantage_normalization=False, advantage_mode="rloo",
                  reference_kl_enabled=True, reference_kl_coef=0.05, reference_devices="cpu",
                  eval_dataset=EVAL).run_config
    assert (cfg.training.steps, cfg.magrpo.num_turns, cfg.magrpo.joint_mode) == (6, 3, "cross")


@pytest.mark.parametrize(("args", "expected"), [
    ({}, {"training.steps": 20 * 3, "magrpo.learning_rate": 5e-6, "magrpo.num_generations": 4,
          "model.max_new_tokens": 256, "model.temperature": 0.6, "model.top_p": 0.6, "model.top_k": 50,
          "magrpo.num_turns": 2, "magrpo.discount": 1.0, "magrpo.joint_mode": "align",
          "magrpo.early_termination_threshold": -0.2, "magrpo.advantage.baseline": "mean",
          "magrpo.advantage.scale": "group", "magrpo.loss.kl_coef": 0.0, "training.eval_every": 0,
          "training.eval_size": None, "magrpo.num_agents": 2, "model.name": "tiny-random", "agents.models": None,
          # CoMLRL's update, whatever the fields say
          "agents.mode": "full", "magrpo.loss.aggregation": "seq_sum", "magrpo.advantage.credit": "sum",
          "training.trees_per_step": 1, "evaluation.greedy": False, "evaluation.samples": 1,
          "evaluation.probe_problems": 0}),
    ({"num_train_epochs": 2, "agent_learning_rate": 1e-4, "num_generations": 3, "max_new_tokens": 16,
      "temperature": 1.1, "top_p": 0.9, "top_k": None, "num_turns": 3, "discount": 0.5,
      "early_termination_threshold": None},
     {"training.steps": 6, "magrpo.learning_rate": 1e-4, "magrpo.num_generations": 3, "model.max_new_tokens": 16,
      "model.temperature": 1.1, "model.top_p": 0.9, "model.top_k": 0, "magrpo.num_turns": 3, "magrpo.discount": 0.5,
      "magrpo.early_termination_threshold": None}),
    ({"joint_mode": "cross"}, {"magrpo.joint_mode": "cross", "magrpo.advantage.credit": "sum"}),
    ({"joint_mode": "CROSSED"}, {"magrpo.joint_mode": "cross"}),
    # with normalization every advantage_mode gives (R - mean) / std; without it each is its own baseline
    ({"advantage_mode": "max"}, {"magrpo.advantage.baseline": "mean", "magrpo.advantage.scale": "group"}),
    ({"advantage_normalization": False}, {"magrpo.advantage.baseline": "mean", "magrpo.advantage.scale": "none"}),
    ({"advantage_normalization": False, "advantage_mode": "raw"}, {"magrpo.advantage.baseline": "none"}),
    ({"advantage_normalization": False, "advantage_mode": "max"}, {"magrpo.advantage.baseline": "max"}),
    ({"advantage_normalization": False, "advantage_mode": "rloo"}, {"magrpo.advantage.baseline": "loo"}),
    ({"reference_kl_enabled": True, "reference_kl_coef": 0.2}, {"magrpo.loss.kl_coef": 0.2}),
    ({"reference_kl_coef": 0.2}, {"magrpo.loss.kl_coef": 0.0}),  # as in 1.4.3: the coefficient alone does nothing
    ({"eval_interval": 3, "eval_num_samples": 2, "eval_dataset": EVAL},
     {"training.eval_every": 3, "training.eval_size": 2, "dataset.eval_size": 2}),
    ({"eval_interval": 0, "eval_dataset": EVAL}, {"training.eval_every": 0, "dataset.eval_size": 0}),
    ({"eval_num_samples": 0, "eval_dataset": EVAL}, {"training.eval_every": 0, "dataset.eval_size": 0}),
    ({"overrides": ["agents.mode=lora", "training.output_dir=runs/x"]},
     {"agents.mode": "lora", "training.output_dir": "runs/x"}),
    ({"model_config": {"torch_dtype": "bfloat16"}}, {"model.dtype": "bfloat16"}),
])
def test_each_field_becomes_the_documented_key(args: dict[str, Any], expected: dict[str, Any]) -> None:
    cfg = trainer(**args).run_config
    assert {k: key(cfg, k) for k in expected} == expected


def test_the_eval_rows_are_the_first_eval_num_samples_items() -> None:
    t = trainer(eval_interval=1, eval_num_samples=2, eval_dataset=EVAL)
    assert t.eval_items == EVAL[:2] and t.train_items == TRAIN


def test_a_single_turn_run_needs_no_transition_and_agents_set_their_count() -> None:
    from comlrl.trainers import MAGRPOConfig, MAGRPOTrainer

    t = MAGRPOTrainer(agents=["tiny-random"] * 3, reward_func=lambda *c, **k: [0.0], train_dataset=TRAIN,
                      args=MAGRPOConfig(num_turns=1))
    assert t.num_agents == 3 and t.run_config.magrpo.num_agents == 3 and t.run_config.agents.models is None
    two = MAGRPOTrainer(agents=["tiny-random", "/models/other"], reward_func=reward_two, train_dataset=TRAIN,
                        args=MAGRPOConfig(num_turns=1))
    assert two.run_config.agents.models == ["tiny-random", "/models/other"]


@pytest.mark.parametrize(("name", "value"), [
    ("logging_steps", 10), ("parallel_training", "mp"), ("agent_devices", "cuda:1"), ("reference_devices", "cuda:2"),
    ("eval_batch_size", 4), ("rollout_buffer_size", 8), ("train_batch_size", 1), ("num_agents", 3),
    ("discount", 0.9), ("joint_mode", "crossed"), ("reference_kl_enabled", True),
])
def test_a_field_without_meaning_or_read_differently_warns_in_one_line(name: str, value: Any,
                                                                       caplog: pytest.LogCaptureFixture) -> None:
    args = {name: value, **({"agent_devices": ["cuda:0", "cuda:1"]} if name == "parallel_training" else {})}
    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        trainer(**args)
    mine = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"MAGRPOConfig.{name}=")]
    assert len(mine) == 1 and "\n" not in mine[0], [r.getMessage() for r in caplog.records]


def test_defaults_and_the_other_arguments_warn_only_where_given(caplog: pytest.LogCaptureFixture) -> None:
    from comlrl.trainers import MAGRPOTrainer

    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        trainer()
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        MAGRPOTrainer(agent_model="tiny-random", reward_func=reward_two, external_transition=transition_three,
                      train_dataset=TRAIN, eval_logger=print, eval_aggregator=print, tokenizer=object(),
                      wandb_config={"project": "p", "entity": "e", "name": "n"},
                      model_config={"attn_implementation": "x"})
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(":", 1)[0] for line in lines] == ["model_config", "tokenizer", "wandb_config", "eval_logger",
                                                         "eval_aggregator"], lines


def test_every_field_that_has_no_meaning_here_is_documented() -> None:
    doc = (ROOT / "docs" / "comlrl-compat.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")}
    assert set(FIELDS_143) <= rows and set(NO_MEANING) <= rows


@pytest.mark.parametrize(("args", "message"), [
    ({"num_generations": 1}, r"^config error: MAGRPOConfig.num_generations=1 is not allowed; expected an integer >= 2"),
    ({"parallel_training": "dp"}, r"^config error: MAGRPOConfig.parallel_training='dp' is not allowed"),
    ({"parallel_training": "mp"}, r"^config error: MAGRPOConfig.parallel_training='mp' .*agent_devices"),
    ({"advantage_mode": "best"}, r"^config error: MAGRPOConfig.advantage_mode='best' is not allowed"),
    ({"joint_mode": "diagonal"}, r"^config error: MAGRPOConfig.joint_mode='diagonal' is not allowed"),
    ({"reference_kl_coef": -1.0}, r"^config error: MAGRPOConfig.reference_kl_coef=-1.0 is not allowed"),
    ({"temperature": 0.0},
     r"^config error: model.temperature=0.0 is not allowed; .*\(from MAGRPOConfig.temperature\)$"),
    ({"discount": 1.5}, r"^config error: magrpo.discount=1.5 is not allowed; .*\(from MAGRPOConfig.discount\)$"),
    ({"joint_mode": "cross", "num_generations": 100},
     r"^config error: magrpo.num_generations=100 .*\(from MAGRPOConfig.num_generations\)$"),
    ({"external_transition": None}, r"^config error: external_transition: MAGRPOConfig.num_turns=2 needs one"),
    ({"model_config": {"special_tokens": {"additional_special_tokens": ["<fim>"]}}},
     r"^config error: model_config: special_tokens cannot be added here"),
    ({"model_config": {"torch_dtype": "float16"}}, r"^config error: model_config: dtype 'float16' is not allowed"),
    ({"overrides": ["agents.mode=lora"], "model_config": None, "joint_mode": "aligned"}, None),  # lora: one base, fine
])
def test_what_would_change_training_silently_is_refused_in_one_line(args: dict[str, Any], message: str | None) -> None:
    if message is None:
        trainer(**args)
        return
    with pytest.raises(ConfigError, match=message):
        trainer(**args)


def test_different_models_on_lora_and_misused_entry_points_are_refused(tmp_path: Path) -> None:
    from comlrl.trainers import MAGRPOConfig, MAGRPOTrainer

    with pytest.raises(ConfigError, match=r"agents.mode=lora puts every agent on one base model"):
        MAGRPOTrainer(agents=["tiny-random", "/models/other"], reward_func=reward_two, train_dataset=TRAIN,
                      args=MAGRPOConfig(num_turns=1), overrides=["agents.mode=lora"])
    with pytest.raises(ConfigError, match=r"^config error: agent_model: either agent_model or agents"):
        MAGRPOTrainer(reward_func=reward_two, args=MAGRPOConfig(num_turns=1))
    with pytest.raises(ConfigError, match=r"^config error: reward_func: "):
        MAGRPOTrainer(agent_model="tiny-random", args=MAGRPOConfig(num_turns=1))
    with pytest.raises(ConfigError, match=r"^config error: tokenizer: agents\[0\] is a loaded model"):
        MAGRPOTrainer(agents=[object(), object()], reward_func=reward_two, args=MAGRPOConfig(num_turns=1))
    t = trainer()
    with pytest.raises(ConfigError, match=r"^config error: train: do_sample: generation keywords"):
        t.train(do_sample=False)
    with pytest.raises(ConfigError, match=r"resume_from_checkpoint=.* is not a run directory"):
        t.train(resume_from_checkpoint=tmp_path)
    with pytest.raises(RuntimeError, match=r"^save_model: call train\(\) first"):
        t.save_model(tmp_path / "out")
    with pytest.raises(ConfigError, match=r"^config error: train_dataset: training requires a train_dataset"):
        MAGRPOTrainer(agent_model="tiny-random", reward_func=reward_two, args=MAGRPOConfig(num_turns=1)).train()


def test_the_scripts_torch_seed_chooses_the_run() -> None:
    """1.4.3 samples from torch's global generator, so `torch.manual_seed(s)` (or transformers' `set_seed`) before
    the trainer chooses the run: here it becomes training.seed; an override of training.seed still wins."""
    import torch

    seeds = []
    for s in (1, 2, 1):
        torch.manual_seed(s)
        seeds.append(key(trainer(num_turns=1).run_config, "training.seed"))
    assert seeds[0] == seeds[2] != seeds[1]
    torch.manual_seed(1)
    assert key(trainer(num_turns=1, overrides=["training.seed=5"]).run_config, "training.seed") == 5


def test_formatters_follow_1_4_3_on_later_turns() -> None:
    item = {"prompt": "P", "x": 1}
    plain, with_kw = formatters_for([lambda it: f"<{it['prompt']}|{it.get('_original_prompt')}>",
                                     lambda it, external_prompts=None: f"[{external_prompts}]"], 2, False)
    assert (plain.first(item), plain.later(item, "E")) == ("<P|None>", "<E|P>")
    assert (with_kw.first(item), with_kw.later(item, "E")) == ("[None]", "[E]")
    passthrough = formatters_for(lambda it: "F", 2, True)
    assert [f.later(item, "E") for f in passthrough] == ["E", "E"]
    assert [f.first(item) for f in formatters_for(None, 2, False)] == ["P", "P"]
    with pytest.raises(CallbackError, match=r"^formatters: expected 2 callables"):
        formatters_for([str], 2, False)
    with pytest.raises(CallbackError, match=r"^formatters\[0\] \(.*<lambda>\) returned int, expected a prompt string"):
        Formatter(lambda it: 3, 0).first(item)


def test_the_reward_function_is_called_in_1_4_3_s_forms() -> None:
    item = {"prompt": "P", "answer": "a"}
    seen: list[Any] = []

    def kw_only(a: list[str], b: list[str], batch_items: list[dict] | None = None) -> list[float]:
        seen.append(("kw", a, b, batch_items))
        return [1.5, 9.0]

    def prompts_first(prompts: list[str], a: list[str], b: list[str]) -> tuple[float]:
        seen.append(("prompts", prompts, a, b))
        return (2.0,)

    def star(*completions: list[str], **kwargs: Any) -> float:
        seen.append(("star", completions, sorted(kwargs)))
        return 3

    assert RewardCall(kw_only, 2, None)(("x", "y"), item, "FP") == (1.5, 1.5)
    assert RewardCall(prompts_first, 2, lambda r: r * 10)(("x", "y"), item, "FP") == (2.0, 20.0)
    assert RewardCall(star, 2, None)(("x", "y"), item, "FP") == (3.0, 3.0)
    assert seen == [("kw", ["x"], ["y"], [item]), ("prompts", ["FP"], ["x"], ["y"]),
                    ("star", (["x"], ["y"]), ["batch_items", "prompts"])]
    with pytest.raises(CallbackError, match=r"^reward_func \(test_.*<locals>.<lambda>\) raised KeyError: 'nope'$"):
        RewardCall(lambda a, b: [item["nope"]], 2, None)(("x", "y"), item, "FP")
    with pytest.raises(CallbackError, match=r"returned str 'bad'; expected a list of numbers$"):
        RewardCall(lambda a, b: "bad", 2, None)(("x", "y"), item, "FP")
    with pytest.raises(CallbackError, match=r"returned nan as the first value; expected a finite number$"):
        RewardCall(lambda a, b: [float("nan")], 2, None)(("x", "y"), item, "FP")


def test_the_transition_gets_the_keywords_it_takes_and_must_return_a_prompt_per_agent() -> None:
    assert TransitionCall(transition_three, 2)("P", ["a", "b"], [["p0"], ["p1"]], [["a"], ["b"]]) == ["revise P"] * 2
    got: dict[str, Any] = {}

    def full(**kwargs: Any) -> list[str]:
        got.update(kwargs)
        return ["n0", "n1"]

    TransitionCall(full, 2)("P", ["a", "b"], [["p0"], ["p1"]], [["a"], ["b"]])
    assert got == {"prompt": "P", "agent_completions": ["a", "b"], "num_agents": 2,
                   "prompt_history_per_agent": [["p0"], ["p1"]], "response_history_per_agent": [["a"], ["b"]]}
    with pytest.raises(CallbackError, match=r"returned list of 1; expected a list of 2 prompts"):
        TransitionCall(lambda **k: ["one"], 2)("P", ["a", "b"], [[], []], [[], []])


def test_the_task_builds_turn_two_from_the_transition_without_a_model(tmp_path: Path) -> None:
    """The registered task on its own: rows back from dataset.jsonl, first prompts from the formatters, a joint
    action's reward from one call, and a continuing path's prompts from the transition through the formatters."""
    from comlrl.api import write_rows
    from comlrl.config.registry import TASKS
    from comlrl.tree.contracts import Continuation, JointTurn
    from comlrl.tree.nodes import Node

    calls: list[dict[str, Any]] = []

    def transition(prompt: str, agent_completions: list[str], num_agents: int, prompt_history_per_agent: list,
                   response_history_per_agent: list) -> list[str]:
        calls.append({"prompt": prompt, "asked": prompt_history_per_agent, "said": response_history_per_agent})
        return [f"T2 {prompt} {c}" for c in agent_completions]

    t = trainer(external_transition=transition, eval_interval=1, eval_num_samples=1, eval_dataset=EVAL)
    from comlrl.trainers.task import task_rows

    write_rows(task_rows(t.train_items, t.eval_items), tmp_path / "d.jsonl")
    task = TASKS.get(t.task_name).from_config(t.run_config.task, None)
    t.run_config.dataset.path = str(tmp_path / "d.jsonl")
    train, evals = task.load(t.run_config.dataset)
    assert [p.item for p in train] == TRAIN and [p.item for p in evals] == EVAL[:1]
    root = Node(id="r", turn=1, root=0, messages=task.initial_messages(train[0]), state=task.initial_state(train[0]))
    assert root.messages == [[{"role": "user", "content": "def f0(x):"}]] * 2
    [(reward, child_state)] = task.score_joint([JointTurn(train[0], ("a", "f0 here"), root.state)])
    assert (reward.total, reward.components, reward.scored) == (2.0, {"reward_func": 2.0}, ("a", "f0 here"))
    root.next_states = [child_state]
    [msgs] = task.transition(None).next_messages(task, [Continuation(train[0], root, 0, [["a"], ["f0 here"]])])
    # not passthrough: the transition's prompt replaces the item's, and the (default) formatter returns it
    assert msgs == [[{"role": "user", "content": "T2 def f0(x): a"}],
                    [{"role": "user", "content": "T2 def f0(x): f0 here"}]]
    assert calls == [{"prompt": "def f0(x):", "asked": [["def f0(x):"], ["def f0(x):"]], "said": [["a"], ["f0 here"]]}]
    assert child_state.per_agent == ["T2 def f0(x): a", "T2 def f0(x): f0 here"]


# ------------------------------------------------------------------------------- scripts in 1.4.3's style (slow)

RUN_KEYS = ["logging.progress_bar=false", "logging.tensorboard=false", "training.torch_threads=1"]


def aux_formatter(item: dict) -> str:
    return f"Write a helper function aux for:\n{item['prompt']}"


def main_formatter(item: dict) -> str:
    return f"Write {item['entry_point']} (you may call aux) for:\n{item['prompt']}"


def code_reward(aux: list[str], main: list[str], batch_items: list[dict] | None = None) -> list[float]:
    """A stand-in for an execution reward: structure points for each agent's part, and a graded term (distinct
    characters) so that siblings differ and the update has a signal."""
    item = batch_items[0]
    return [0.5 * ("def" in aux[0]) + 0.5 * (item["entry_point"] in main[0]) + len(set(aux[0] + main[0])) / 50]


TRANSITIONS: list[dict[str, Any]] = []


def code_transition(prompt: str, agent_completions: list[str], num_agents: int,
                    prompt_history_per_agent: list | None = None, response_history_per_agent: list | None = None
                    ) -> list[str]:
    TRANSITIONS.append({"history": response_history_per_agent, "asked": prompt_history_per_agent})
    return [f"{prompt}\n# REVISE-TURN2 agent {a}: your last answer was {len(c)} characters" for a, c in
            enumerate(agent_completions)]


@pytest.mark.slow
def test_a_two_agent_two_turn_code_script_trains_unchanged(tmp_path: Path) -> None:
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

    TRANSITIONS.clear()
    problems = [{"prompt": "def add(a, b):\n    '''Sum.'''", "entry_point": "add", "test": "assert add(1, 2) == 3"},
                {"prompt": "def neg(x):\n    '''Negate.'''", "entry_point": "neg", "test": "assert neg(1) == -1"}]
    trainer = MAGRPOTrainer(
        agent_model="tiny-random", num_agents=2, reward_func=code_reward, formatters=[aux_formatter, main_formatter],
        external_transition=code_transition, train_dataset=problems,
        args=MAGRPOConfig(num_train_epochs=1, num_turns=2, num_generations=2, max_new_tokens=8, temperature=1.0,
                          top_p=1.0, discount=1.0, joint_mode="aligned", early_termination_threshold=None,
                          agent_learning_rate=1e-4),
        overrides=[*RUN_KEYS, f"training.output_dir={tmp_path / 'run'}"])
    trainer.train()
    trainer.save_model(tmp_path / "final_model")

    metrics = trainer.result.metrics
    assert [m["step"] for m in metrics] == [1, 2]  # one tree per item, no evaluation (no eval_dataset)
    assert any(m["grad_norm"] > 0 and m["samples"] > 0 for m in metrics) and all("loss" in m for m in metrics)
    assert all("turn_2/reward_mean" in m for m in metrics)
    # every continuing joint action went through the transition, with 1.4.3's histories
    assert len(TRANSITIONS) == 2 * 2 and all(len(c["history"][a]) == 1 and len(c["asked"][a]) == 1
                                              for c in TRANSITIONS for a in range(2))
    trees = [json.loads(line) for line in (tmp_path / "run" / "trees.jsonl").read_text().splitlines()]
    second = [t for t in trees if t["turn"] == 2]
    assert len(second) == 4
    for node in second:  # the transition's prompt, put through each agent's formatter (not passthrough)
        aux, main = (node["prompts"][a][-1]["content"] for a in range(2))
        assert aux.startswith("Write a helper function aux for:") and "REVISE-TURN2 agent 0" in aux
        assert main.startswith("Write ") and "REVISE-TURN2 agent 1" in main
    for a in range(2):
        folder = tmp_path / "final_model" / f"agent_{a}"
        assert (folder / "config.json").is_file() and (folder / "tokenizer_config.json").is_file()
        assert list(folder.glob("*.safetensors"))


def writing_reward(summary: list[str], elaboration: list[str]) -> list[float]:
    """The elaboration about twice as long as the summary (a length-ratio reward, as writing tasks use)."""
    return [-abs(len(elaboration[0]) / max(1, len(summary[0])) - 2.0)]


@pytest.mark.slow
def test_a_single_turn_writing_script_with_a_reward_only_trains_unchanged(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from comlrl.models import resolve_model_path
    from comlrl.trainers.magrpo import MAGRPOConfig, MAGRPOTrainer  # the path releases before 1.4 used

    path = resolve_model_path("tiny-random")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    posts = [{"prompt": f"Post {i}: the cat sat on the mat for {i} hours."} for i in range(3)]
    trainer = MAGRPOTrainer(
        agents=[model, model], tokenizer=tok, reward_func=writing_reward, reward_processor=lambda r: 2 * r,
        formatters=[lambda x: f"Summarise: {x['prompt']}", lambda x: f"Elaborate: {x['prompt']}"],
        train_dataset=posts[:2], eval_dataset=posts[2:],
        args=MAGRPOConfig(num_train_epochs=1, num_turns=1, num_generations=2, max_new_tokens=8, eval_interval=1,
                          eval_num_samples=1, agent_learning_rate=1e-3),
        overrides=[*RUN_KEYS, "agents.mode=lora", f"training.output_dir={tmp_path / 'run'}"])
    trainer.train()
    trainer.save_model(tmp_path / "saved")

    metrics = trainer.result.metrics
    assert [m["step"] for m in metrics] == [0, 1, 2] and metrics[0]["eval/problems"] == 1
    assert "eval/sampled/reward_mean" in metrics[-1] and any(m["grad_norm"] > 0 for m in metrics[1:])
    trees = [json.loads(line) for line in (tmp_path / "run" / "trees.jsonl").read_text().splitlines()]
    pairs = [(r, d["components"]["reward_func"]) for t in trees for r, d in
             zip(t["rewards"], t["reward_details"], strict=True)]
    assert pairs and all(total == 2 * raw for total, raw in pairs)  # reward_processor applied to the raw value
    for a in range(2):  # adapters merged into the saved base: plain model folders
        assert (tmp_path / "saved" / f"agent_{a}" / "config.json").is_file()
        assert not (tmp_path / "saved" / f"agent_{a}" / "adapter_config.json").exists()
    folder = trainer.sources.folder  # the loaded model, saved once, lives as long as the trainer
    assert trainer.run_config.model.name == str(folder / "agent_0") and folder.is_dir()
    del trainer
    gc.collect()
    assert not folder.exists()


@pytest.mark.slow
def test_a_run_without_checkpoint_arguments_keeps_no_checkpoint_and_leaves_no_folder(tmp_path: Path) -> None:
    """CoMLRL 1.4.3 writes nothing without checkpoint_dir: here the run's folder is a scratch folder with no
    checkpoint, no TensorBoard logs, no plots and no final weights (the trainer holds them, as 1.4.3's holds its
    agents: every agent's weights would land in /tmp at a model's size); save_model writes them, and the folder
    is removed with the trainer."""
    from comlrl.trainers import MAGRPOConfig, MAGRPOTrainer

    trainer = MAGRPOTrainer(agent_model="tiny-random", num_agents=2, reward_func=reward_two, train_dataset=TRAIN,
                            args=MAGRPOConfig(num_train_epochs=1, num_turns=1, num_generations=2, max_new_tokens=4,
                                              eval_num_samples=0),
                            overrides=RUN_KEYS)
    trainer.train()
    run = trainer.output_dir
    assert run is not None and run.name.startswith("comlrl-magrpo-run-") and run.is_dir()
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").iterdir())
    assert not (run / "tensorboard").exists() and not (run / "plots").exists() and not (run / "final").exists()
    assert trainer.result.metrics[-1]["step"] == 3  # 3 items, 1 epoch
    trainer.save_model(tmp_path / "saved")
    assert (tmp_path / "saved" / "agent_1" / "config.json").is_file()
    trainer.save_model(tmp_path / "again")  # the held weights, written once, serve every later save
    assert (tmp_path / "again" / "agent_1" / "config.json").is_file()
    del trainer
    gc.collect()
    assert not run.exists()
