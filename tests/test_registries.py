"""The algorithm's own registries (advantage estimators, losses) and the config's choice lists, which come from
the code that owns each value: a registered name is a valid config value, and no list is copied by hand."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
import torch

from comlrl import models
from comlrl.config.checks import LR_SCHEDULES
from comlrl.config.registry import ESTIMATORS, LOSSES, register_estimator, register_loss
from comlrl.config.schema import ConfigError, choices, load_config
from comlrl.engines import ENGINES
from comlrl.learn import advantages, loss
from comlrl.tasks.datasets import DATASET_NAMES
from comlrl.tree import nodes as tree
from feedback.context import CONTEXTS, SLICE_OF
from sandbox.isolation import LEVELS


def test_every_choice_list_is_its_owners() -> None:
    from comlrl.run.components import SCHEDULES

    c = choices()
    assert c["magrpo.joint_mode"] == tree.JOINT_MODES
    assert c["magrpo.advantage.baseline"] == tuple(advantages.ESTIMATORS) == ("mean", "loo", "max", "none")
    assert c["magrpo.advantage.scale"] == advantages.SCALES and c["magrpo.advantage.credit"] == advantages.CREDITS
    assert c["magrpo.loss.aggregation"] == tuple(loss.LOSSES) == ("token_mean", "seq_mean", "seq_sum")
    assert c["rollout.engine"] == ENGINES
    assert c["model.dtype"] == models.DTYPES and c["agents.mode"] == models.AGENT_MODES
    assert c["magrpo.lr_schedule"] == LR_SCHEDULES == tuple(SCHEDULES)
    assert c["sandbox.isolation"] == ("auto", *LEVELS)
    assert c["dataset.name"] == DATASET_NAMES
    assert c["external.sandbox_slice_of"] == SLICE_OF and c["external.passed_context"] == CONTEXTS


def test_each_owner_refuses_what_its_list_leaves_out() -> None:
    from comlrl.engines import RolloutConfig, build_engine

    with pytest.raises(ValueError, match="joint_mode='diagonal'"):
        tree.joint_actions(2, 2, "diagonal")
    with pytest.raises(ValueError, match="baseline='median'"):
        advantages.group_advantages([1.0, 2.0], baseline="median")
    with pytest.raises(ValueError, match="aggregation='token_sum'"):
        loss.step_normaliser([3], "token_sum")
    with pytest.raises(ValueError, match="rollout.engine='sglang'"):
        build_engine(RolloutConfig("sglang"), None, 0)


@pytest.fixture
def median() -> Iterator[str]:
    def centre(values: Sequence[float]) -> list[float]:
        ordered = sorted(values)
        mid = ordered[len(ordered) // 2]
        return [v - mid for v in values]

    assert register_estimator("test_median", centre) is centre
    yield "test_median"
    ESTIMATORS.table.pop("test_median")


def test_a_registered_estimator_is_a_config_value_and_computes_the_advantages(median: str) -> None:
    cfg = load_config(None, [f"magrpo.advantage.baseline={median}", "magrpo.advantage.scale=none"])
    assert cfg.magrpo.advantage.baseline == median
    assert advantages.group_advantages([1.0, 2.0, 6.0], baseline=median, scale="none") == [-1.0, 0.0, 4.0]
    assert advantages.group_advantages([2.0, 2.0], baseline=median, scale="none") is None  # tied: no signal


def test_an_estimator_needing_what_the_trainer_lacks_is_refused_at_load() -> None:
    register_estimator("test_critic", lambda values: list(values), needs=("values",))
    try:
        with pytest.raises(ConfigError, match=r"^config error: magrpo.advantage.baseline='test_critic' is not "
                                              r"allowed; expected one whose inputs this trainer provides "
                                              r"\(test_critic needs values\)$"):
            load_config(None, ["magrpo.advantage.baseline=test_critic"])
    finally:
        ESTIMATORS.table.pop("test_critic")


def test_a_registered_loss_is_a_config_value_and_aggregates() -> None:
    rule = loss.LossRule(reduce=lambda tok, mask: (tok * mask).amax(dim=1).sum(), normaliser=lambda lengths: 1.0)
    assert register_loss("test_max_token", rule) is rule
    try:
        assert load_config(None, ["magrpo.loss.aggregation=test_max_token"]).magrpo.loss.aggregation == "test_max_token"
        tok = torch.tensor([[1.0, 5.0], [2.0, 3.0]])
        assert float(loss.aggregate(tok, torch.ones_like(tok), "test_max_token", 2.0)) == 4.0
        with pytest.raises(TypeError, match="must be a comlrl.learn.loss.LossRule"):
            register_loss("test_fn", lambda tok, mask: tok)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="'token_mean' is already registered"):
            register_loss("token_mean", rule)
    finally:
        LOSSES.table.pop("test_max_token")


def test_a_loss_needing_pairs_is_refused_until_the_trainer_provides_them() -> None:
    register_loss("test_pairs", loss.LossRule(loss.LOSSES["token_mean"].reduce, len, needs=("pairs",)))
    try:
        with pytest.raises(ConfigError, match=r"magrpo.loss.aggregation='test_pairs' .* \(test_pairs needs pairs\)$"):
            load_config(None, ["magrpo.loss.aggregation=test_pairs"])
    finally:
        LOSSES.table.pop("test_pairs")


def test_the_algorithm_registry_is_the_table_the_config_and_the_update_read():
    from comlrl.config.registry import ALGORITHMS, register_algorithm
    from comlrl.learn import algorithms

    assert (choices()["algorithm.name"] == tuple(algorithms.ALGORITHMS)
            == ("magrpo", "centralized", "madpo", "iac", "maac", "marlhf"))
    mine = algorithms.Algorithm(algorithms.ALGORITHMS["magrpo"].units, algorithms.ALGORITHMS["magrpo"].loss)
    register_algorithm("test_pg", mine)
    try:
        assert load_config(None, ["algorithm.name=test_pg"]).algorithm.name == "test_pg"
        with pytest.raises(ValueError, match="already registered"):
            register_algorithm("test_pg", algorithms.ALGORITHMS["madpo"])
        with pytest.raises(TypeError, match="comlrl.learn.algorithms.Algorithm"):
            register_algorithm("test_fn", lambda roots: [])  # type: ignore[arg-type]
    finally:
        ALGORITHMS.table.pop("test_pg")
    with pytest.raises(ConfigError, match=r"^config error: algorithm.name='test_pg' is not allowed"):
        load_config(None, ["algorithm.name=test_pg"])


def test_an_algorithm_declares_its_own_config_section_checked_where_it_is_defined():
    from dataclasses import dataclass

    from comlrl.config.checks import algorithm_sections
    from comlrl.config.registry import ALGORITHMS, register_algorithm
    from comlrl.learn import algorithms

    @dataclass
    class TemperedOptions:
        tau: float = 1.0

        def check(self) -> None:
            if self.tau <= 0:
                raise ConfigError(f"config error: algorithm.tempered.tau={self.tau!r} is not allowed; expected > 0")

    base = algorithms.ALGORITHMS["magrpo"]
    register_algorithm("test_tempered", algorithms.Algorithm(base.units, base.loss,
                                                             options=("tempered", TemperedOptions)))
    try:
        cfg = load_config(None, ["algorithm.name=test_tempered", "algorithm.tempered.tau=0.5"])
        assert cfg.algorithm.tempered.tau == 0.5 and cfg.algorithm.dpo.beta == 0.1  # the built-ins' keys stay
        with pytest.raises(ConfigError, match=r"^config error: algorithm.tempered.tau=-1.0 is not allowed"):
            load_config(None, ["algorithm.tempered.tau=-1"])
        register_algorithm("test_clash", algorithms.Algorithm(base.units, base.loss, options=("dpo", TemperedOptions)))
        with pytest.raises(ConfigError, match=r"algorithm 'test_clash' cannot have options algorithm.dpo"):
            load_config(None, [])
    finally:
        ALGORITHMS.table.pop("test_tempered")
        ALGORITHMS.table.pop("test_clash", None)
    with pytest.raises(ConfigError, match=r"algorithm.tempered"):  # gone with its algorithm
        load_config(None, ["algorithm.tempered.tau=0.5"])
    assert [key for key, _ in algorithm_sections()] == ["dpo", "critic", "marlhf"]


def test_a_task_on_the_bare_task_protocol_is_refused_in_one_line_naming_the_base_to_use() -> None:
    """Plugins written before the opt-in protocols subclassed `Task` and implemented `score`: registering one
    says what to change instead of failing later inside the trainer."""
    from comlrl.config.registry import TASKS, register_task
    from comlrl.tree.contracts import Task

    class OldStyle(Task):
        num_agents, role_names, reward_range = 1, ["solver"], (0.0, 1.0)

    with pytest.raises(TypeError) as err:
        register_task("old_style_task", OldStyle)
    assert "OldStyle must subclass comlrl.tasks.base.TaskDefaults" in str(err.value)
    assert "old_style_task" not in TASKS.names()
