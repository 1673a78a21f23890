"""Extensions from user modules (comlrl.config.registry): a task and a feedback mode, selected by the config."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from comlrl.config.registry import TASKS, TRANSITIONS, Registry, register_task
from comlrl.config.schema import ConfigError, load_config, schema_keys
from comlrl.tasks import build_task
from comlrl.tree.contracts import TaskDefaults

HERE = Path(__file__).resolve().parent
PLUGINS = ["plugins=[rhyme_task,echo_feedback]"]


def test_plugins_register_names_the_config_accepts() -> None:
    cfg = load_config(None, [*PLUGINS, "task.name=rhyme", "magrpo.num_agents=1", "external.mode=echo_score"])
    assert cfg.plugins == ["rhyme_task", "echo_feedback"]
    assert "rhyme" in TASKS and "echo_score" in TRANSITIONS
    task = build_task(cfg.task, None)
    assert type(task).__name__ == "RhymeTask" and task.num_agents == 1
    [r] = task.score([(task.load(cfg.dataset)[0][0], ["hat bat mat"])])
    assert r.components["rhymes"] == 1.0 and r.all_passed
    # the fallback of expert_edits may be a registered mode too
    assert load_config(None, [*PLUGINS, "external.expert_fallback=echo_score"]).external.expert_fallback == "echo_score"


def test_num_agents_is_read_from_the_registered_task() -> None:
    with pytest.raises(ConfigError, match=r"^config error: magrpo.num_agents=2 is not allowed; expected 1 for "
                                          r"task.name=rhyme$"):
        load_config(None, [*PLUGINS, "task.name=rhyme"])


@pytest.mark.parametrize(("override", "message"), [
    ("task.name=limerick", "config error: task.name='limerick' is not allowed; expected one of: code_collab, "
                           "code_single, tool_agent, actions"),
    ("external.mode=shout", "config error: external.mode='shout' is not allowed; expected one of: level_feedback, "
                            "level_passed, passed, plain"),
    ("plugins=[no_such_module_xyz]", "config error: plugins: cannot import 'no_such_module_xyz': "
                                     "ModuleNotFoundError: No module named 'no_such_module_xyz'"),
])
def test_unknown_names_and_plugins_fail_with_one_line(override: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_taken_name_is_refused_and_re_registering_the_same_object_is_not() -> None:
    table: dict[str, object] = {}
    reg: Registry[object] = Registry("thing", table)
    first = object()
    assert reg.register("a", first) is first and reg.register("a", first) is first
    with pytest.raises(ValueError, match="thing: 'a' is already registered"):
        reg.register("a", object())
    with pytest.raises(ValueError, match="non-empty string"):
        reg.register(" ", object())
    with pytest.raises(ValueError, match="task.name: 'code_collab' is already registered"):
        register_task("code_collab", type("Other", (TaskDefaults,), {}))


def test_a_plugin_task_declares_its_options_and_checks_them() -> None:
    """`task.count_words.*` are config keys like the built-in tasks' (the task's `options_type`), with the
    defaults in the resolved config, checked by the task at load time, and given to the task it builds."""
    base = ["plugins=[count_task]", "task.name=count_words", "magrpo.num_agents=1"]
    cfg = load_config(None, [*base, "task.count_words.target=7"])
    task = build_task(cfg.task, None)
    assert task.options.target == 7
    assert [p.prompt for p in task.load(cfg.dataset)[0]] == ["sea", "sky", "snow"]
    [r] = task.score([(task.load(cfg.dataset)[0][0], ["one two three four five six seven"])])
    assert r.all_passed and r.total == 1.0
    assert "task.count_words.target: 5" in "\n".join(f"{k}: {v}" for k, v in schema_keys())
    with pytest.raises(ConfigError, match=r"^config error: task.count_words.target=0 is not allowed; expected an "
                                          r"integer >= 1$"):
        load_config(None, [*base, "task.count_words.target=0"])
    with pytest.raises(ConfigError, match="task.count_words.wrong"):
        load_config(None, [*base, "task.count_words.wrong=1"])


def test_user_modules_are_short() -> None:
    for name in ("rhyme_task.py", "echo_feedback.py", "count_task.py", "best_sibling.py"):
        assert len((HERE / name).read_text().splitlines()) < 60, name


@pytest.mark.slow
def test_plugin_task_mode_and_algorithm_train_one_step_from_the_config(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(HERE.parent / "trainer"))
    from trainer_helpers import TINY, env, metrics, train

    run = tmp_path / "run"
    config = tmp_path / "rhyme.yaml"
    config.write_text("plugins: [rhyme_task, echo_feedback, best_sibling]\ntask: {name: rhyme}\n"
                      "external: {mode: echo_score}\nalgorithm: {name: best_sibling}\n"
                      "magrpo: {num_agents: 1, num_turns: 2, num_generations: 2}\n")
    args = ["--config", str(config), *[a for a in TINY if not a.startswith("external.mode=")], "training.steps=1",
            f"training.output_dir={run}"]
    pythonpath = os.pathsep.join((str(HERE), env()["PYTHONPATH"]))
    res = train(args, extra_env={"PYTHONPATH": pythonpath})
    assert res.returncode == 0, res.stderr[-3000:]
    lines = metrics(run)
    assert [r["step"] for r in lines] == [0, 1]
    assert lines[1]["nodes"] == 3 and lines[1]["joint_actions"] == 6  # 1 + G=2 nodes; G + G*G scored
    # the plug-in algorithm trained on the best sibling of each group with a spread (or logged none)
    assert lines[1]["samples"] == lines[1]["adv_groups"] - lines[1]["adv_groups_skipped"]
    assert "best/nll_per_token" in lines[1]
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    turn2 = [t for t in trees if t["turn"] == 2]
    assert len(turn2) == 2
    for t in turn2:  # the echo_score prompt: first chat, the answer, then the score of that answer
        chat = t["prompts"][0]
        assert chat[0]["content"].startswith("Word: ") and chat[1]["role"] == "assistant"
        assert chat[2]["content"].startswith("That answer scored ")
    assert all("rhymes" in d["components"] for t in trees for d in t["reward_details"])


def test_a_registered_reward_scores_the_code_tasks_and_bounds_the_threshold() -> None:
    cfg = load_config(None, ["plugins=[short_code_reward]", "task.name=code_single", "magrpo.num_agents=1",
                             "task.reward=short_code"])
    task = build_task(cfg.task, None)  # no sandbox: this reward executes nothing
    assert task.reward_range == (0.0, 1.0)
    problem = task.load(cfg.dataset)[0][0]
    [r] = task.score([(problem, ["```python\ndef f():\n    return 1\n```"])])
    code = r.codes[0]  # the code the task extracted (entry point renamed/wrapped as the levels would score it)
    assert r.total == pytest.approx(1.0 / (1.0 + len(code) / 100.0)) and r.components == {"agent0": r.total}
    cfg = load_config(None, ["plugins=[short_code_reward]", "task.name=tool_agent", "magrpo.num_agents=1",
                             "task.reward=short_code"])
    with pytest.raises(ConfigError, match=r"^config error: task.reward='short_code' is not allowed; expected levels "
                                          r"for task.name=tool_agent"):
        build_task(cfg.task, None)  # at start-up, before any model loads
    with pytest.raises(ConfigError, match=r"^config error: task.reward='long' is not allowed; expected one of: levels"):
        load_config(None, ["task.reward=long"])
