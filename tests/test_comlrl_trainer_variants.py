"""CoMLRL 1.4.3's other trainers on this engine (comlrl/trainers/, docs/comlrl-compat.md, "The other trainers of
1.4.3"): each imports from 1.4.3's path with 1.4.3's fields and defaults, and builds its run config (no model is
loaded) with the mapped algorithm and keys; what has no meaning warns in one line, what would silently change
training is refused in one line. One slow test trains IAC for two steps on the tiny test model."""

from __future__ import annotations

import logging
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from comlrl.errors import ConfigError
from comlrl.trainers.callbacks import CallbackError, RewardCall

TRAIN = [{"prompt": f"def f{i}(x):", "entry_point": f"f{i}"} for i in range(3)]
EVAL = [{"prompt": f"def g{i}(x):", "entry_point": f"g{i}"} for i in range(5)]
# CoMLRL 1.4.3's IACConfig and MAACConfig, field by field with their defaults (trainers/actor_critic/ of the wheel)
IAC_143: dict[str, Any] = {
    "agent_learning_rate": 5e-6, "critic_learning_rate": 5e-6, "rollout_buffer_size": 8, "train_batch_size": None,
    "value_clip_range": 0.2, "value_loss_coef": 0.6, "advantage_normalization": True, "max_new_tokens": 256,
    "temperature": 0.6, "top_p": 0.6, "top_k": None, "num_train_epochs": 40, "use_separate_critic": True,
    "critic_type": "v", "critic_value_head_hidden_dim": None, "value_head_hidden_dim": None, "num_agents": 2,
    "num_turns": 2, "parallel_training": "none", "agent_devices": None, "critic_devices": None,
    "external_prompt_passthrough": False, "discount": 1.0, "num_generations": 1, "eval_interval": 16,
    "eval_num_samples": 4, "eval_batch_size": 1, "early_termination_threshold": -0.2, "logging_steps": 1,
    "reference_kl_enabled": False, "reference_kl_coef": 0.1, "reference_devices": None,
}
MAAC_143: dict[str, Any] = {
    "agent_learning_rate": 5e-6, "critic_learning_rate": 5e-6, "rollout_buffer_size": 8, "train_batch_size": None,
    "value_loss_coef": 0.6, "advantage_normalization": True, "max_new_tokens": 256, "temperature": 0.6,
    "top_p": 0.6, "top_k": None, "num_train_epochs": 40, "num_agents": 2, "num_generations": 1, "num_turns": 2,
    "parallel_training": "none", "agent_devices": None, "critic_devices": None, "external_prompt_passthrough": False,
    "discount": 1.0, "critic_type": "v", "early_termination_threshold": -0.2, "eval_interval": 16,
    "eval_num_samples": 4, "eval_batch_size": 1, "logging_steps": 1, "reference_kl_enabled": False,
    "reference_kl_coef": 0.1, "reference_devices": None,
}


def reward(a: list[str], b: list[str], batch_items: list[dict] | None = None) -> list[float]:
    return [float(len(a[0]) > 0) + float(batch_items[0]["entry_point"] in b[0])]


def key(cfg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        cfg = vars(cfg)[part]
    return cfg


def keys(trainer: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    return {k: key(trainer.run_config, k) for k in wanted}


def ac(kind: str, items: list[dict] = TRAIN, **kw: Any) -> Any:
    """An IAC or MAAC trainer over tiny-random built from its config (one turn unless kw says), nothing loaded."""
    from comlrl.trainers.actor_critic.iac import IACConfig, IACTrainer
    from comlrl.trainers.actor_critic.maac import MAACConfig, MAACTrainer

    trainer_cls, config_cls = (IACTrainer, IACConfig) if kind == "iac" else (MAACTrainer, MAACConfig)
    extra = {k: kw.pop(k) for k in ("eval_dataset", "critic_model", "critics", "metrics_callback", "model_config",
                                    "external_transition") if k in kw}
    kw.setdefault("num_turns", 1)
    return trainer_cls(agent_model="tiny-random", reward_func=reward, train_dataset=items, args=config_cls(**kw),
                       **extra)


# ------------------------------------------------------------------------------------ classes and defaults

def test_the_actor_critic_configs_have_1_4_3_s_fields_and_defaults_only() -> None:
    from comlrl.trainers.actor_critic import IACConfig, MAACConfig

    assert [(f.name, f.default) for f in fields(IACConfig)] == list(IAC_143.items())  # in 1.4.3's order
    assert [(f.name, f.default) for f in fields(MAACConfig)] == list(MAAC_143.items())
    assert IACConfig(critic_learning_rate=None, agent_learning_rate=1e-5).critic_learning_rate == 1e-5  # as 1.4.3


def test_the_variants_are_magrpo_configs_with_their_advantage_mode() -> None:
    from comlrl.trainers.reinforce import (
        CentralizedMAGRPOConfig,
        MAGRPOConfig,
        MAREINFORCEConfig,
        MAReMaxConfig,
        MARLOOConfig,
    )

    assert [c().advantage_mode for c in (MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig)] == ["raw", "max", "rloo"]
    for cls in (MAREINFORCEConfig, MAReMaxConfig, MARLOOConfig):
        assert [f.name for f in fields(cls)] == [f.name for f in fields(MAGRPOConfig)]
    central = CentralizedMAGRPOConfig()
    assert (central.num_turns, central.collaboration_mode, central.num_agents) == (1, "centralized", 2)
    assert [f.name for f in fields(CentralizedMAGRPOConfig)][-1] == "collaboration_mode"


def test_each_class_is_the_same_object_on_1_4_3_s_paths() -> None:
    import comlrl.trainers as top
    from comlrl.trainers import actor_critic, reinforce
    from comlrl.trainers.actor_critic import ac_base, iac, maac
    from comlrl.trainers.reinforce import centralized_magrpo, mareinforce, maremax, marloo

    assert top.IACTrainer is actor_critic.IACTrainer is iac.IACTrainer
    assert top.MAACConfig is actor_critic.MAACConfig is maac.MAACConfig
    assert top.ActorCriticTrainerBase is ac_base.ActorCriticTrainerBase and issubclass(iac.IACTrainer,
                                                                                       ac_base.ActorCriticTrainerBase)
    assert top.MAREINFORCETrainer is reinforce.MAREINFORCETrainer is mareinforce.MAREINFORCETrainer
    assert top.MAReMaxTrainer is maremax.MAReMaxTrainer and top.MARLOOTrainer is marloo.MARLOOTrainer
    assert reinforce.CentralizedMAGRPOTrainer is centralized_magrpo.CentralizedMAGRPOTrainer
    assert all(issubclass(c, top.MAGRPOTrainer) for c in (top.MAREINFORCETrainer, top.MAReMaxTrainer,
                                                           top.MARLOOTrainer, reinforce.CentralizedMAGRPOTrainer))


# --------------------------------------------------------------------------------------- the MAGRPO variants

@pytest.mark.parametrize(("name", "normalize", "expected"), [
    ("MAREINFORCE", True, ("mean", "group")),  # 1.4.3 normalises every mode to (R - mean) / std
    ("MAReMax", True, ("mean", "group")),
    ("MARLOO", True, ("mean", "group")),
    ("MAREINFORCE", False, ("none", "none")),
    ("MAReMax", False, ("max", "none")),
    ("MARLOO", False, ("loo", "none")),
])
def test_each_variant_trains_magrpo_with_its_baseline(name: str, normalize: bool, expected: tuple[str, str]) -> None:
    import comlrl.trainers.reinforce as reinforce

    config_cls, trainer_cls = vars(reinforce)[f"{name}Config"], vars(reinforce)[f"{name}Trainer"]
    t = trainer_cls(agent_model="tiny-random", reward_func=reward, train_dataset=TRAIN,
                    args=config_cls(num_turns=1, advantage_normalization=normalize, num_train_epochs=2))
    assert keys(t, {"algorithm.name": 0, "magrpo.advantage.baseline": 0, "magrpo.advantage.scale": 0,
                    "training.steps": 0, "magrpo.loss.aggregation": 0}) == {
        "algorithm.name": "magrpo", "magrpo.advantage.baseline": expected[0], "magrpo.advantage.scale": expected[1],
        "training.steps": 6, "magrpo.loss.aggregation": "seq_sum"}
    assert t.algorithm_name == name and isinstance(t.args, config_cls)
    assert trainer_cls(agent_model="tiny-random", reward_func=reward, train_dataset=TRAIN,
                       external_transition=lambda **k: ["p", "p"]).args.advantage_mode == config_cls().advantage_mode


# ---------------------------------------------------------------------------------------- IAC and MAAC

COMMON_AC = {"magrpo.joint_mode": "align", "algorithm.critic.gae_lambda": 0.0, "magrpo.loss.aggregation": "seq_sum",
             "magrpo.max_grad_norm": 1e9, "agents.mode": "full", "magrpo.num_agents": 2, "magrpo.num_generations": 1,
             "magrpo.learning_rate": 5e-6, "algorithm.critic.value_coef": 0.6, "model.temperature": 0.6,
             "model.top_p": 0.6, "model.top_k": 0, "model.max_new_tokens": 256, "magrpo.num_turns": 1,
             "magrpo.discount": 1.0, "magrpo.loss.kl_coef": 0.0, "training.eval_every": 0}


@pytest.mark.parametrize(("kind", "items", "args", "expected"), [
    # defaults, 3 items: 1.4.3's buffer of 8 is flushed at each epoch's end, so an update holds the 3 items
    ("iac", 3, {}, {**COMMON_AC, "algorithm.name": "iac", "algorithm.critic.kind": "v",
                    "algorithm.critic.learning_rate": 5e-6, "training.trees_per_step": 3, "training.steps": 40,
                    "magrpo.advantage.scale": "group"}),
    ("maac", 3, {}, {**COMMON_AC, "algorithm.name": "maac", "algorithm.critic.learning_rate": 5e-6,
                     "training.trees_per_step": 3, "training.steps": 40}),
    # 20 items: 8 per update, 40 epochs x 20 items / 8 = 100 steps; eval every 16 items = every 2 steps
    ("iac", 20, {"eval_dataset": EVAL}, {"training.trees_per_step": 8, "training.steps": 100,
                                         "training.eval_every": 2, "training.eval_size": 4}),
    # G = 4: an item gives each agent 4 samples, two items fill the buffer of 8
    ("iac", 20, {"num_generations": 4, "num_train_epochs": 2}, {"training.trees_per_step": 2, "training.steps": 20,
                                                                "magrpo.num_generations": 4}),
    # two turns (G = 1): 2 samples per item, 4 items per update; TD(0) across turns with the discount
    ("maac", 20, {"num_turns": 2, "discount": 0.9, "external_transition": lambda **k: ["a", "b"]},
     {"training.trees_per_step": 4, "magrpo.num_turns": 2, "magrpo.discount": 0.9,
      "algorithm.critic.gae_lambda": 0.0}),
    # a buffer of one sample: 1.4.3 does not whiten one advantage, so neither here
    ("iac", 20, {"rollout_buffer_size": 1}, {"training.trees_per_step": 1, "magrpo.advantage.scale": "none",
                                             "training.steps": 800}),
    ("iac", 3, {"advantage_normalization": False}, {"magrpo.advantage.scale": "none"}),
    # a head on the agent (1.4.3's use_separate_critic=False) trains at the agent's rate
    ("iac", 3, {"use_separate_critic": False, "value_clip_range": None}, {"algorithm.critic.learning_rate": None}),
    ("iac", 3, {"critic_learning_rate": 1e-3, "critic_type": "Q", "value_loss_coef": 0.25, "top_k": 20,
                "agent_learning_rate": 2e-5},
     {"algorithm.critic.learning_rate": 1e-3, "algorithm.critic.kind": "q", "algorithm.critic.value_coef": 0.25,
      "model.top_k": 20, "magrpo.learning_rate": 2e-5}),
    ("maac", 3, {"reference_kl_enabled": True, "reference_kl_coef": 0.05}, {"magrpo.loss.kl_coef": 0.05}),
    ("iac", 3, {"model_config": {"model_kwargs": {"torch_dtype": "bfloat16"}, "torch_dtype": "float32"}},
     {"model.dtype": "bfloat16"}),  # the nested dtype first, as 1.4.3's actor-critics read it
])
def test_the_actor_critics_map_their_fields_to_iac_and_maac(kind: str, items: int, args: dict[str, Any],
                                                            expected: dict[str, Any]) -> None:
    rows = [{"prompt": f"p{i}", "entry_point": f"f{i}"} for i in range(items)]
    assert keys(ac(kind, rows, **args), expected) == expected


def test_the_actor_critics_warn_only_where_given(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        ac("iac")
        ac("maac")
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        ac("iac", critic_model="tiny-random", metrics_callback=print, train_batch_size=2, logging_steps=5,
           parallel_training="mp", agent_devices=["cuda:0"], critic_devices=["cuda:1"])
        ac("maac", critics=["tiny-random"])
        ac("iac", use_separate_critic=False, critic_learning_rate=1e-3)
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(":", 1)[0].split("=", 1)[0] for line in lines] == [
        "critic_model", "metrics_callback", "IACConfig.logging_steps", "IACConfig.parallel_training",
        "IACConfig.agent_devices", "IACConfig.critic_devices", "IACConfig.train_batch_size", "critics",
        "IACConfig.value_clip_range", "IACConfig.critic_learning_rate"], lines
    assert "linear value head on each agent's own model" in lines[0] and "mean of linear value heads" in lines[7]
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize(("kind", "args", "message"), [
    ("iac", {"value_head_hidden_dim": 64}, r"^config error: IACConfig.value_head_hidden_dim=64 is not allowed; "
                                           r"expected None \(the value heads here are one linear layer"),
    ("iac", {"critic_value_head_hidden_dim": 8}, r"^config error: IACConfig.critic_value_head_hidden_dim=8 "),
    ("iac", {"use_separate_critic": False, "critic_model": "tiny-random"},
     r"^config error: critic_model: a critic model is given with IACConfig.use_separate_critic=False"),
    ("iac", {"num_turns": 2, "num_generations": 2}, r"^config error: IACConfig.num_generations=2 is not allowed; "
                                                    r"expected 1 with num_turns=2"),
    ("maac", {"critic_type": "x"}, r"^config error: MAACConfig.critic_type='x' is not allowed"),
    ("maac", {"parallel_training": "mp", "agent_devices": ["cuda:0"]},
     r"^config error: MAACConfig.parallel_training='mp' .*critic_devices"),
    ("maac", {"num_turns": 2}, r"^config error: external_transition: MAACConfig.num_turns=2 needs one"),
    ("iac", {"temperature": 0.0}, r"^config error: model.temperature=0.0 .*\(from IACConfig.temperature\)$"),
])
def test_what_would_change_an_actor_critic_silently_is_refused(kind: str, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ac(kind, **args)


def test_an_actor_critic_reward_is_one_per_joint_action_and_sees_every_prompt() -> None:
    item = {"prompt": "P"}
    seen: list[Any] = []

    def with_prompts(prompts: list[str], a: list[str], b: list[str]) -> list[float]:
        seen.append(prompts)
        return [2.0, 2.0]  # one per agent, equal: one reward

    call = RewardCall(with_prompts, 2, lambda r: r - 4, read="joint", all_prompts=True)
    assert call(("x", "y"), item, ["P0", "P1"]) == (2.0, -2.0) and seen == [["P0", "P1"]]
    with pytest.raises(CallbackError, match=r"returned 2 different values \[1.0, 0.0\]: per-agent rewards have no "
                                            r"counterpart here \(one reward per joint action\)"):
        RewardCall(lambda a, b: [1.0, 0.0], 2, None, read="joint")(("x", "y"), item, ["P0", "P1"])
    assert RewardCall(lambda a, b: [1.0, 0.0], 2, None)(("x", "y"), item, ["P0", "P1"]) == (1.0, 1.0)  # MAGRPO: first


# ---------------------------------------------------------------------------------------- centralized

class Adapter:
    """A 1.4.3-style adapter: the roles' prompts joined; the completion cut at '|'."""

    def build_prompt(self, batch_item: dict, agent_prompts: list[str]) -> str:
        return " + ".join(agent_prompts)

    def parse_completion(self, completion: str, batch_item: dict, num_agents: int) -> list[str]:
        from comlrl.trainers.preference import CentralizedComparatorParseError

        if "|" not in completion:
            raise CentralizedComparatorParseError("no cut")
        return completion.split("|", 1)


def central(**kw: Any) -> Any:
    from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig, CentralizedMAGRPOTrainer

    kw.setdefault("reward_func", reward)
    return CentralizedMAGRPOTrainer(centralized_adapter=kw.pop("adapter", Adapter()), agent_model="tiny-random",
                                    formatters=[lambda x: f"aux {x['prompt']}", lambda x: f"main {x['entry_point']}"],
                                    train_dataset=TRAIN, args=CentralizedMAGRPOConfig(**kw.pop("args", {})), **kw)


def test_centralized_magrpo_is_magrpo_on_one_policy_prompted_and_scored_through_the_adapter() -> None:
    from comlrl.config.registry import TASKS
    from comlrl.trainers.task import ItemProblem

    t = central(reward_processor=lambda r: 10 * r)
    assert keys(t, {"magrpo.num_agents": 0, "algorithm.name": 0, "magrpo.num_turns": 0}) == {
        "magrpo.num_agents": 1, "algorithm.name": "magrpo", "magrpo.num_turns": 1}
    task = TASKS.get(t.task_name).from_config(t.run_config.task, None)
    item = TRAIN[0]
    problem = ItemProblem("0", item, tuple(f.first(item) for f in task.hooks.formatters))
    assert task.initial_messages(problem) == [[{"role": "user", "content": "aux def f0(x): + main f0"}]]
    (scored, _), (unparsed, _) = task.score_turns([type("T", (), {"texts": (text,), "problem": problem,
                                                                  "state": task.initial_state(problem)})()
                                                   for text in ("helper|calls f0", "no cut here")])
    assert (scored.total, scored.components) == (20.0, {"reward_func": 2.0})  # both parts, processor applied
    assert (unparsed.total, unparsed.components) == (0.0, {"reward_func": 0.0})  # every part "": 0 + 0


def test_centralized_magrpo_refuses_what_1_4_3_refuses() -> None:
    from comlrl.trainers.reinforce.centralized_magrpo import CentralizedMAGRPOConfig

    with pytest.raises(ConfigError, match=r"^config error: CentralizedMAGRPOConfig.num_turns=2 is not allowed"):
        CentralizedMAGRPOConfig(num_turns=2)
    with pytest.raises(ConfigError, match=r"collaboration_mode='decentralized' is not allowed; expected centralized"):
        CentralizedMAGRPOConfig(collaboration_mode="decentralized")
    with pytest.raises(ConfigError, match=r"^config error: num_agents=3 must match args.num_agents=2"):
        central(num_agents=3)
    with pytest.raises(ConfigError, match=r"^config error: centralized_adapter.parse_completion must be callable"):
        central(adapter=type("Half", (), {"build_prompt": lambda *a: "p"})())
    t = central(reward_func=lambda a, b: [1.0, 2.0])
    with pytest.raises(CallbackError, match=r"returned 2 values; a centralized reward returns one joint reward"):
        t.centralized(["a|b"], batch_items=[TRAIN[0]])


# ----------------------------------------------------------------------------------------------- slow

RUN_KEYS = ["logging.progress_bar=false", "logging.tensorboard=false", "training.torch_threads=1"]


def graded(a: list[str], b: list[str], batch_items: list[dict] | None = None) -> list[float]:
    """Structure points and distinct characters: siblings differ, so the whitened advantages are not 0."""
    return [0.5 * ("def" in a[0]) + 0.5 * (batch_items[0]["entry_point"] in b[0]) + len(set(a[0] + b[0])) / 50]


@pytest.mark.slow
def test_an_iac_script_trains_two_steps_and_saves_agents_and_value_heads(tmp_path: Path) -> None:
    from comlrl.trainers.actor_critic import IACConfig, IACTrainer
    from comlrl.utils.reward_processor import RewardProcessors

    problems = [{"prompt": f"def f{i}(x):\n    '''Return x + {i}.'''", "entry_point": f"f{i}"} for i in range(4)]
    trainer = IACTrainer(
        agent_model="tiny-random", reward_func=graded, reward_processor=RewardProcessors.shift(-1.0),
        formatters=[lambda x: f"Write a helper for:\n{x['prompt']}", lambda x: f"Write {x['entry_point']}"],
        args=IACConfig(num_turns=1, num_train_epochs=1, rollout_buffer_size=2, max_new_tokens=8, temperature=1.0,
                       top_p=1.0, use_separate_critic=False, value_clip_range=None, agent_learning_rate=1e-4),
        train_dataset=problems, overrides=[*RUN_KEYS, f"training.output_dir={tmp_path / 'run'}"])
    assert (trainer.run_config.training.trees_per_step, trainer.run_config.training.steps) == (2, 2)
    trainer.train()
    trainer.save_model(tmp_path / "saved")

    metrics = trainer.result.metrics
    assert [m["step"] for m in metrics] == [1, 2]  # 4 items, 2 per update, one epoch; no evaluation
    assert all(m["samples"] > 0 and "value/mse" in m and m["grad_norm"] > 0 for m in metrics)
    assert metrics[0]["value/mean"] == 0.0  # zero-initialised heads
    for a in range(2):
        assert (tmp_path / "saved" / f"agent_{a}" / "config.json").is_file()
    assert (tmp_path / "saved" / "value_heads.pt").is_file()
