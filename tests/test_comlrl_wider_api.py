"""CoMLRL 1.4.3's wider API here (issue 69, point 6): every public name of 1.4.3 is in docs/comlrl-compat.md's name
table with what it is here, and the table says true (importable, refused on construction, or absent); 1.4.3's
`RewardProcessors` and reward-range helpers behave as there; the config field names before 1.4 map to 1.4.3's.
The trainers' mapping is tests/test_comlrl_trainer_variants.py."""

from __future__ import annotations

import importlib
import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest

from comlrl.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
STATUSES = ("works", "warns", "refused", "not provided")
# CoMLRL 1.4.3's public names, module by module: `python benchmarks/comlrl143_names.py <wheel>/comlrl --json`
# (each name where it is defined and where a package re-exports it)
NAMES_143: dict[str, str] = {
    "comlrl.models": "CausalLMWithValueHead ValueHead ActorCriticOutput",
    "comlrl.models.actor_critic": "ActorCriticOutput ValueHead CausalLMWithValueHead",
    "comlrl.schedulers": "DeviceScheduler",
    "comlrl.schedulers.device_scheduler": "DeviceSpec normalize_parallel_training DeviceScheduler",
    "comlrl.trainers": ("ActorCriticTrainerBase IACConfig IACTrainer MAACConfig MAACTrainer MAGRPOConfig MAGRPOTrainer "
                        "MADPOConfig MADPOTrainer MARLHFConfig MARLHFTrainer JointRewardModel MAREINFORCEConfig "
                        "MAREINFORCETrainer MAReMaxConfig MAReMaxTrainer MARLOOConfig MARLOOTrainer"),
    "comlrl.trainers.actor_critic": "ActorCriticTrainerBase IACConfig IACTrainer RolloutSample MAACConfig MAACTrainer",
    "comlrl.trainers.actor_critic.ac_base": "ActorCriticTrainerBase",
    "comlrl.trainers.actor_critic.iac": "RewardFunc Formatter MetricsCallback IACConfig RolloutSample IACTrainer",
    "comlrl.trainers.actor_critic.maac": "RewardFunc Formatter MetricsCallback MAACConfig MAACTrainer",
    "comlrl.trainers.preference": ("MADPOConfig MADPOTrainer CentralizedComparatorAdapter "
                                   "CentralizedComparatorParseError TaggedCentralizedComparatorAdapter MADPOIterConfig "
                                   "MADPOIterTrainer MARLHFConfig MARLHFTrainer MARLHFIterConfig MARLHFIterTrainer "
                                   "JointRewardModel"),
    "comlrl.trainers.preference.centralized": ("CentralizedComparatorParseError CentralizedComparatorAdapter "
                                               "TaggedCentralizedComparatorAdapter"),
    "comlrl.trainers.preference.checkpointing": ("validate_preference_progress validate_preference_extra_state "
                                                 "preference_extra_state restore_preference_extra_state "
                                                 "validate_preference_assets prune_preference_asset_pool "
                                                 "save_preference_assets load_preference_assets "
                                                 "train_iterations_checkpointed"),
    "comlrl.trainers.preference.collaboration": ("joint_sequence_log_prob joint_policy_gradient_loss "
                                                 "CentralizedCollaboration"),
    "comlrl.trainers.preference.iterative": ("MADPOIterConfig MARLHFIterConfig PreferenceReplayShard MADPOIterTrainer "
                                             "MARLHFIterTrainer"),
    "comlrl.trainers.preference.madpo": "AgentPreferenceTensors PreferencePair MADPOConfig MADPOTrainer",
    "comlrl.trainers.preference.marlhf": "JointRewardModel MARLHFConfig MARLHFTrainer",
    "comlrl.trainers.preference.output_paths": "resolve_output_path",
    "comlrl.trainers.reinforce": ("MAGRPOConfig MAGRPOTrainer CentralizedMAGRPOConfig CentralizedMAGRPOTrainer "
                                  "MAREINFORCEConfig MAREINFORCETrainer MAReMaxConfig MAReMaxTrainer MARLOOConfig "
                                  "MARLOOTrainer"),
    "comlrl.trainers.reinforce.centralized_magrpo": "CentralizedMAGRPOConfig CentralizedMAGRPOTrainer",
    "comlrl.trainers.reinforce.magrpo": "MAGRPOConfig NodeSample MAGRPOTrainer",
    "comlrl.trainers.reinforce.mareinforce": "MAREINFORCEConfig MAREINFORCETrainer",
    "comlrl.trainers.reinforce.maremax": "MAReMaxConfig MAReMaxTrainer",
    "comlrl.trainers.reinforce.marloo": "MARLOOConfig MARLOOTrainer",
    "comlrl.utils": ("read_checkpoint_metadata build_formatters ensure_pad_token ensure_tokenizer "
                     "apply_tokenizer_specials resolve_tokenizers infer_model_name resolve_model_sources "
                     "clone_reference_models load_reference_models_from_sources reference_kl_coef reference_kl_enabled "
                     "reference_kl_for_sequence resolve_reference_devices validate_reference_kl_config "
                     "RewardProcessors call_reward_function normalize_reward_lengths resolve_reward_range "
                     "set_reward_range DistributedContext local_context unwrap_model"),
    "comlrl.utils.checkpoint": ("CHECKPOINT_VERSION STATE_FILENAME read_checkpoint_metadata capture_rng_state "
                                "restore_rng_state capture_trainer_state restore_trainer_state "
                                "TrainingCheckpointMixin"),
    "comlrl.utils.distributed": "DistributedContext local_context unwrap_model",
    "comlrl.utils.formatters": "Formatter build_formatters",
    "comlrl.utils.model_loading": "resolve_model_kwargs freeze_model infer_model_name resolve_model_sources",
    "comlrl.utils.reference_kl": ("reference_kl_enabled reference_kl_coef validate_reference_kl_config "
                                  "resolve_reference_devices clone_reference_models load_reference_models_from_sources "
                                  "response_token_logprobs reference_kl_for_sequence"),
    "comlrl.utils.reward_processor": "RewardProcessors",
    "comlrl.utils.reward_utils": ("RewardCallable resolve_reward_range set_reward_range call_reward_function "
                                  "normalize_reward_lengths"),
    "comlrl.utils.tokenizer_utils": "ensure_pad_token ensure_tokenizer resolve_tokenizers apply_tokenizer_specials",
    "comlrl.utils.wandb_utils": "wandb_init_kwargs verbose_from_wandb_config",
}
TRAIN = [{"prompt": f"def f{i}(x):"} for i in range(3)]


def doc_table() -> dict[tuple[str, str], str]:
    """(module, name) -> status, from the rows of docs/comlrl-compat.md's name table."""
    doc = (ROOT / "docs" / "comlrl-compat.md").read_text()
    table = doc[doc.index("## 1.4.3's names, module by module"):]
    out: dict[tuple[str, str], str] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if not line.startswith("| `comlrl") or len(cells) != 3:
            continue
        module = cells[0].strip("`")
        status = next(s for s in STATUSES if cells[2].startswith(s))
        for name in re.findall(r"`([A-Za-z_]+)`", cells[1]):
            assert (module, name) not in out, f"{module}.{name} is in two rows"
            out[module, name] = status
    return out


def names_143() -> set[tuple[str, str]]:
    return {(module, name) for module, names in NAMES_143.items() for name in names.split()}


# ------------------------------------------------------------------------------------------ the name table

def test_every_name_of_1_4_3_has_one_row_in_the_doc_table_and_nothing_else_does() -> None:
    table = doc_table()
    assert len(names_143()) == 167  # the script counts 167 on the 1.4.3 wheel
    assert set(table) == names_143(), (sorted(names_143() - set(table)), sorted(set(table) - names_143()))


@pytest.mark.parametrize(("module", "name"), sorted(names_143()))
def test_each_name_is_what_the_table_says(module: str, name: str) -> None:
    status = doc_table()[module, name]
    if status == "not provided":
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            found = None
        assert found is None, f"{module}.{name} imports here but the table says not provided"
        return
    obj = getattr(importlib.import_module(module), name)  # works, warns, refused: importable from 1.4.3's path
    if status == "refused":
        with pytest.raises(ConfigError, match=rf"^config error: {name}: 1\.4\.3's .* no counterpart here: "):
            obj()
    else:
        assert not getattr(obj, "__doc__", "") or "Refused here" not in obj.__doc__


def test_the_packages_re_export_the_same_objects_as_their_modules() -> None:
    for module in ("comlrl.trainers", "comlrl.trainers.reinforce", "comlrl.trainers.actor_critic",
                   "comlrl.trainers.preference", "comlrl.utils"):
        package = importlib.import_module(module)
        for name in NAMES_143[module].split():
            if doc_table()[module, name] == "not provided":
                continue
            homes = [m for m, n in names_143() if n == name and m.startswith(module + ".")]
            for home in homes:
                if doc_table()[home, name] != "not provided":
                    assert getattr(package, name) is getattr(importlib.import_module(home), name), (module, home, name)


# --------------------------------------------------------------------------------- comlrl.utils, as 1.4.3

def test_reward_processors_import_from_1_4_3_s_path_and_compute_as_there() -> None:
    from comlrl.utils import RewardProcessors as top
    from comlrl.utils.reward_processor import RewardProcessors

    assert top is RewardProcessors
    scale, shift = RewardProcessors.scale, RewardProcessors.shift
    assert (scale(2.0)(1.5), scale(factor=-0.5)(4.0), scale()(3.25)) == (3.0, -2.0, 3.25)
    assert (shift(-4.0)(1.0), shift(value=0.5)(2.0), shift()(7.5)) == (-3.0, 2.5, 7.5)
    # the environment repositories' composition: scale, then shift
    assert shift(-4.0)(scale(0.5)(3.0)) == -2.5
    # x * factor and x + value as they are: ints stay ints, anything with * and + works
    assert scale(3)(2) == 6 and isinstance(scale(3)(2), int) and shift(1)(2) == 3
    assert scale(2)([1]) == [1, 1] and shift("b")("a") == "ab"


def test_a_reward_processor_from_the_utils_is_applied_by_the_trainers() -> None:
    from comlrl.trainers.callbacks import RewardCall
    from comlrl.utils.reward_processor import RewardProcessors

    shifted = RewardCall(lambda a, b: [1.0], 2, RewardProcessors.shift(-4.0))
    assert shifted(("x", "y"), {"prompt": "p"}, "p") == (1.0, -3.0)


def test_reward_ranges_are_declared_and_read_as_in_1_4_3() -> None:
    from comlrl.utils.reward_utils import resolve_reward_range, set_reward_range

    def reward(a: list[str], b: list[str]) -> list[float]:
        return [0.0]

    assert resolve_reward_range(reward) is None
    assert set_reward_range(reward, 0, 4) is reward and resolve_reward_range(reward) == (0.0, 4.0)
    for bad, message in (((1, 1), "minimum must be less than maximum"), ((0, math.inf), "must be finite"),
                         ((0, 1, 2), "two-item sequence"), ("ab", "two-item sequence")):
        reward.reward_range = bad  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match=message):
            resolve_reward_range(reward)


# ---------------------------------------------------------------------------------------- names before 1.4

def magrpo(**kw: Any) -> Any:
    """A MAGRPOTrainer over tiny-random, one turn, built from MAGRPOConfig(**kw) on the path before 1.4."""
    from comlrl.trainers.magrpo import MAGRPOConfig, MAGRPOTrainer

    return MAGRPOTrainer(agent_model="tiny-random", reward_func=lambda a, b: [0.0], train_dataset=TRAIN,
                         args=MAGRPOConfig(num_turns=1, **kw))


def test_the_names_before_1_4_become_1_4_3_s_fields_and_keys() -> None:
    from comlrl.trainers.magrpo import MAGRPOConfig

    args = MAGRPOConfig(learning_rate=2e-5, termination_threshold=None)
    assert (args.agent_learning_rate, args.early_termination_threshold, args.legacy_fields) == (2e-5, None, {})
    cfg = magrpo(learning_rate=3e-5, termination_threshold=0.5, weight_decay=0.01, per_device_train_batch_size=1,
                 save_steps=200).run_config
    assert (cfg.magrpo.learning_rate, cfg.magrpo.early_termination_threshold, cfg.magrpo.weight_decay) == \
        (3e-5, 0.5, 0.01)
    assert magrpo().run_config.magrpo.weight_decay == 0.0  # not given: this engine's default, 1.3.x's too


def test_the_variants_take_the_names_before_1_4_too() -> None:
    from comlrl.trainers.reinforce.marloo import MARLOOConfig

    args = MARLOOConfig(learning_rate=1e-4, termination_threshold=1.0)
    assert (args.agent_learning_rate, args.early_termination_threshold, args.advantage_mode) == (1e-4, 1.0, "rloo")


def test_an_old_name_with_its_new_one_is_one_line() -> None:
    from comlrl.trainers.reinforce.magrpo import MAGRPOConfig

    for old, new in (("learning_rate", "agent_learning_rate"),
                     ("termination_threshold", "early_termination_threshold")):
        with pytest.raises(ConfigError, match=rf"^config error: MAGRPOConfig\.{old}: the name before 1\.4 of {new}; "
                                              "pass one of them, not both$"):
            MAGRPOConfig(**{old: 0.1, new: 0.2})
    with pytest.raises(TypeError):  # a TrainingArguments field no script is known to use: 1.4.3's TypeError
        MAGRPOConfig(gradient_accumulation_steps=2)


def test_old_names_without_meaning_warn_in_one_line_and_a_batch_size_above_one_is_refused(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="comlrl.trainers"):
        magrpo(save_steps=50, dataloader_num_workers=2, dataloader_drop_last=True, output_dir="out")
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split("=", 1)[0] for line in lines] == ["MAGRPOConfig.save_steps", "MAGRPOConfig.dataloader_drop_last",
                                                         "MAGRPOConfig.dataloader_num_workers",
                                                         "MAGRPOConfig.output_dir"], lines
    assert all("a name before 1.4 with no meaning here" in line and "\n" not in line for line in lines)
    with pytest.raises(ConfigError, match=r"^config error: MAGRPOConfig.per_device_train_batch_size=4 is not allowed; "
                                          r"expected 1 \(as the releases before 1.4 required"):
        magrpo(per_device_train_batch_size=4)


# --------------------------------------------------------------------------------------------- refused

@pytest.mark.parametrize(("path", "name", "points_to"), [
    ("comlrl.trainers.preference.madpo", "MADPOTrainer", "algorithm.name=madpo"),
    ("comlrl.trainers.preference.madpo", "MADPOConfig", "algorithm.name=madpo"),
    ("comlrl.trainers.preference.marlhf", "MARLHFTrainer", "algorithm.name=marlhf"),
    ("comlrl.trainers.preference.marlhf", "JointRewardModel", "algorithm.name=marlhf"),
    ("comlrl.trainers.preference.iterative", "MARLHFIterTrainer", "algorithm.dpo.comparator"),
    ("comlrl.trainers", "MADPOTrainer", "algorithm.name=madpo"),
])
def test_the_preference_trainers_import_and_refuse_in_one_line(path: str, name: str, points_to: str) -> None:
    cls = getattr(importlib.import_module(path), name)
    with pytest.raises(ConfigError) as info:
        cls(agent_model="tiny-random", reward_func=print, args=None)
    message = str(info.value)
    assert message.startswith(f"config error: {name}: ") and "\n" not in message and points_to in message
