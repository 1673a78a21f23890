"""Config schema: defaults, YAML + overrides, one-line errors naming the key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from comlrl.config.schema import (
    ConfigError,
    RunConfig,
    default_config,
    load_config,
    to_yaml,
    validate_threshold,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "override,needle",
    [
        ("magrpo.joint_mode=diagonal", "magrpo.joint_mode='diagonal' is not allowed; expected one of: align, cross"),
        ("magrpo.advantage.credit=max", "magrpo.advantage.credit='max' is not allowed; expected one of: mean, sum"),
        ("magrpo.num_generations=1", "magrpo.num_generations=1"),
        ("magrpo.num_turns=-1", "magrpo.num_turns=-1"),
        ("external.sandbox_slice=1.5", "external.sandbox_slice=1.5"),
        ("external.sandbox_slice=first", "external.sandbox_slice='first'"),
        ("magrpo.colour=red", "magrpo.colour"),
        ("magrpo.num_turns=two", "magrpo.num_turns"),
        ("training=3", "training"),
        ("external.mode=loud", "external.mode='loud'"),
        ("magrpo.discount=1.5", "magrpo.discount=1.5"),
        ("magrpo.num_agents=3", "magrpo.num_agents=3 is not allowed; expected 2 for task.name=code_collab"),
        ("dataset.name=jsonl", "dataset.path=None"),
        ("magrpo.loss.inner_epochs=2", "magrpo.loss.inner_epochs=2"),
        ("sandbox.isolation=docker", "sandbox.isolation='docker'"),
        ("nonsense", "override 'nonsense' is not of the form key=value"),
        ("training.time_budget_minutes=0", "training.time_budget_minutes=0.0 is not allowed; expected a number of "
                                           "minutes > 0, or null"),
        ("training.time_budget_minutes=-5", "training.time_budget_minutes=-5.0"),
    ],
)
def test_bad_values_name_the_key(override, needle):
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    msg = str(err.value)
    assert needle in msg and "\n" not in msg and msg.startswith("config error:")


@pytest.mark.parametrize(
    "value,expected", [("1", 1), ("3", 3), ("-1", -1), ("0", None), ("all", None), ("null", None), ("ALL", None)]
)
def test_sandbox_slice_forms(value, expected):
    assert load_config(None, [f"external.sandbox_slice={value}"]).external.sandbox_slice == expected


def test_defaults_and_overrides_round_trip(tmp_path):
    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", ["magrpo.discount=0.9", "training.steps=3"])
    assert isinstance(cfg, RunConfig)
    assert (cfg.magrpo.num_agents, cfg.magrpo.num_turns, cfg.magrpo.num_generations) == (2, 2, 4)
    assert cfg.magrpo.joint_mode == "align" and cfg.magrpo.discount == 0.9 and cfg.training.steps == 3
    path = tmp_path / "resolved.yaml"
    path.write_text(to_yaml(cfg))
    assert load_config(path) == cfg


@pytest.mark.parametrize(("spelling", "stored"), [("aligned", "align"), ("crossed", "cross"), ("cross", "cross")])
def test_comlrl_joint_mode_spellings_are_aliases(spelling, stored):
    assert load_config(None, [f"magrpo.joint_mode={spelling}"]).magrpo.joint_mode == stored


def test_cross_config_differs_only_in_joint_mode():
    a = load_config(ROOT / "configs" / "align_T2_G4.yaml")
    c = load_config(ROOT / "configs" / "cross_T2_G4.yaml")
    assert c.magrpo.joint_mode == "cross"
    c.magrpo.joint_mode = "align"
    c.training.output_dir = a.training.output_dir
    assert a == c


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("magrpo: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_config(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listy)


def test_threshold_validated_against_reward_range():
    cfg = load_config(None, ["magrpo.early_termination_threshold=5.0"])
    with pytest.raises(ConfigError, match=r"early_termination_threshold=5.0 .*\[0.0, 4.0\)"):
        validate_threshold(cfg, (0.0, 4.0))
    validate_threshold(load_config(None, ["magrpo.early_termination_threshold=3.5"]), (0.0, 4.0))
    validate_threshold(load_config(None), (0.0, 4.0))


def test_cli_prints_resolved_config_and_fails_with_one_line():
    ok = subprocess.run(
        [sys.executable, "scripts/train.py", "--config", "configs/align_T2_G4.yaml", "--print-config",
         "magrpo.num_generations=3"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert "num_generations: 3" in ok.stdout and "joint_mode: align" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "scripts/train.py", "--config", "configs/align_T2_G4.yaml", "magrpo.joint_mode=diagonal"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1].startswith("config error: magrpo.joint_mode='diagonal'")
    assert len(bad.stderr.strip().splitlines()) == 1


def _leaves(obj, prefix=""):
    from dataclasses import fields, is_dataclass

    for f in fields(obj):
        value = getattr(obj, f.name)
        key = f"{prefix}{f.name}"
        if is_dataclass(value):
            yield from _leaves(value, key + ".")
        else:
            yield key, value


def test_every_key_is_documented_with_its_default():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for key, default in _leaves(default_config()):
        shown = "null" if default is None else str(default).lower() if isinstance(default, bool) else str(default)
        if isinstance(default, list):
            shown = "[" + ", ".join(default) + "]"
        assert f"| `{key}` | `{shown}` |" in doc, f"{key} (default {shown}) missing from docs/configuration.md"


@pytest.mark.parametrize("value,expected", [
    ("all-linear", "all-linear"), (".*proj", ".*proj"), ("[q_proj,v_proj]", ["q_proj", "v_proj"]),
])
def test_lora_target_modules_takes_the_forms_peft_takes(value, expected):
    assert load_config(None, [f"agents.lora.target_modules={value}"]).agents.lora.target_modules == expected


@pytest.mark.parametrize("value", ["3", "[]", "''", "[q_proj,3]"])
def test_lora_target_modules_refuses_others_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"^config error: agents\.lora\.target_modules="):
        load_config(None, [f"agents.lora.target_modules={value}"])


@pytest.mark.parametrize("name", ["easy", "humaneval"])
def test_dataset_path_with_a_built_in_set_is_refused_naming_both_keys(name):
    with pytest.raises(ConfigError) as err:
        load_config(None, ["dataset.path=mine.jsonl", f"dataset.name={name}"])
    msg = str(err.value)
    assert "dataset.path='mine.jsonl'" in msg and f"dataset.name='{name}'" in msg and "\n" not in msg
    assert load_config(None, ["dataset.path=mine.jsonl", "dataset.name=jsonl"]).dataset.path == "mine.jsonl"


@pytest.mark.parametrize("mode,g,n,t,total", [
    ("cross", 4, 2, 2, 16 + 256), ("cross", 4, 2, 3, 16 + 256 + 4096), ("cross", 2, 2, 4, 4 + 16 + 64 + 256),
    ("align", 4, 2, 3, 4 + 16 + 64), ("cross", 3, 1, 2, 3 + 9),
])
def test_tree_joint_actions(mode, g, n, t, total):
    from comlrl.config.schema import tree_joint_actions

    assert tree_joint_actions(mode, g, n, t) == total


@pytest.mark.parametrize("overrides,warned", [
    (["magrpo.joint_mode=cross"], False),  # 272 per tree
    (["magrpo.joint_mode=cross", "magrpo.num_turns=3"], True),  # 4368
    (["magrpo.joint_mode=cross", "magrpo.num_generations=6"], True),  # 36 + 1296
    (["magrpo.joint_mode=align", "magrpo.num_turns=4"], False),  # align is never warned about
])
def test_cross_mode_warns_once_above_a_thousand_joint_actions_per_tree(overrides, warned, caplog):
    caplog.set_level("WARNING", logger="comlrl")
    load_config(None, overrides)
    hits = [r.getMessage() for r in caplog.records if "scored joint actions" in r.getMessage()]
    assert len(hits) == (1 if warned else 0)
    if warned:
        assert "magrpo.joint_mode=cross" in hits[0] and "> 1000" in hits[0]


@pytest.mark.parametrize("text,line,problem", [
    ("magrpo:\n  num_turns: 2\n  joint_mode: align: cross\n", 3, "mapping values are not allowed in this context"),
    ("training:\n  steps: 3\n\tseed: 1\n", 3, "found a tab character that violates indentation"),
    ("magrpo:\n  num_turns: [2, 3\ntraining:\n  steps: 1\n", 3, "did not find expected ',' or ']'"),
])
def test_yaml_syntax_errors_name_the_file_and_line(tmp_path, text, line, problem):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(bad)
    assert str(err.value) == f"config error: {bad}:{line}: {problem}"


def test_an_output_dir_that_is_a_file_is_refused_at_load(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    for out in (notes, notes / "run"):
        with pytest.raises(ConfigError) as err:
            load_config(None, [f"training.output_dir={out}"])
        assert str(err.value) == (f"config error: training.output_dir={str(out)!r} is not allowed; expected a "
                                  f"directory path ({notes} is a file)")
    assert load_config(None, [f"training.output_dir={tmp_path / 'new' / 'run'}"])  # not there yet: fine


def test_load_config_takes_a_dict_of_overrides_nested_or_dotted() -> None:
    nested = load_config(ROOT / "configs" / "align_T2_G4.yaml", {"training": {"steps": 3}, "magrpo.discount": 0.5})
    dotted = load_config(ROOT / "configs" / "align_T2_G4.yaml", ["training.steps=3", "magrpo.discount=0.5"])
    assert nested == dotted and (nested.training.steps, nested.magrpo.discount) == (3, 0.5)
    assert load_config(None, {"task.reward_funcs": ["reward_fns:length"]}).task.reward_funcs == ["reward_fns:length"]


@pytest.mark.parametrize(("overrides", "message"), [
    ({"training": {"stepz": 3}}, "config error: training.stepz: Key 'stepz' not in 'TrainingConfig'. Did you mean: "
                                  "'steps'?"),
    ({"training.steps": "two"}, "config error: training.steps: Value 'two' of type 'str' could not be converted "
                                "to Integer"),
    ({"training.steps": 2}, None),
])
def test_bad_dict_overrides_are_one_config_error(overrides: dict, message: str | None) -> None:
    if message is None:
        assert load_config(None, overrides).training.steps == 2
        return
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    assert str(err.value) == message


@pytest.mark.parametrize(("key", "value", "message"), [
    ("steps", "two", "config error: training.steps: Value 'two' of type 'str' could not be converted to Integer"),
    ("steps", 2.5, "config error: training.steps: Value '2.5' of type 'float' could not be converted to Integer"),
])
def test_a_wrong_type_set_on_a_loaded_config_is_one_config_error(key: str, value: object, message: str) -> None:
    """The documented ConfigError in one line, not omegaconf's multi-line ValidationError."""
    cfg = load_config(None, ["training.steps=1"])
    setattr(cfg.training, key, value)
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value) == message


@pytest.mark.parametrize("override", ["rollout.redraw_tied=2", "rollout.budget=split", "rollout.branch.samples=2"])
def test_a_removed_tree_switch_is_an_unknown_key(override: str) -> None:
    """The switches measured and removed (docs/results.md#what-did-not-work) fail as any unknown key does."""
    key = override.split("=")[0]
    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "configs" / "align_T2_G4.yaml", [override])
    assert str(err.value).startswith(f"config error: {'.'.join(key.split('.')[:2])}: Key ")
    assert "not in 'RolloutConfig'" in str(err.value) and "\n" not in str(err.value)
