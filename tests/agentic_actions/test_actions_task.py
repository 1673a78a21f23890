"""ActionsTask in the tree trainer's rollout (align and cross): every joint action runs on its own parent's
state, rewards add up as documented, next-turn prompts carry the observations."""

from __future__ import annotations

from pathlib import Path

import pytest
from act_refs import DONE, act
from act_rollout import BAD, paths, problems, rollout

from comlrl.config.schema import ConfigError, load_config
from comlrl.tasks import build_task
from comlrl.tasks.actions import ActionsTask
from comlrl.tasks.actions.options import ActionsTaskConfig


# cross runs two turns, not three: its tree grows 4x per level, and a second turn already acts on states its
# parent left (the property under test); three turns scored 2 x 84 paths, re-scored 456 replayed steps alone
@pytest.mark.parametrize("mode, turns", [("align", 3), ("cross", 2)])
def test_each_joint_action_runs_on_its_own_path(sandbox, tmp_path: Path, mode: str, turns: int) -> None:
    probs = problems("ts-service-cache", "improve-fib")
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=turns), root=str(tmp_path / "ws"))
    roots = rollout(task, probs, mode, turns)
    fresh = ActionsTask(sandbox, ActionsTaskConfig(max_turns=turns), root=str(tmp_path / "ws2"))
    n = 0
    for root in roots:
        prob = probs[root.root]
        for node, j, history in paths(root):
            texts = [node.completions[a][node.joint[j][a]].text for a in range(2)]
            alone = fresh.score_paths([(prob, texts, history)])[0]  # the same path, scored on its own
            assert node.rewards[j] == pytest.approx(alone.total), (mode, node.id, j)
            assert node.details[j].state_key == alone.state_key
            n += 1
    per_node = 2 if mode == "align" else 4
    assert n == 2 * sum(per_node**t for t in range(1, turns + 1))  # align: 2 x 14 paths, cross: 2 x 20
    # the all-reference path solves both tasks (by the last turn: complete_task at 3, the turn limit at 2);
    # the all-BAD path is penalised every turn
    for root in roots:
        bad = len(root.joint) - 1
        leaf, worst = root, root
        for turn in range(1, turns + 1):
            assert worst.rewards[bad] < 0 and worst.details[bad].components["format_errors"] == 2, turn
            if turn < turns:
                leaf, worst = leaf.children[0], worst.children[bad]
        assert leaf.turn == worst.turn == turns
        assert leaf.details[0].all_passed and leaf.details[0].done
        assert leaf.details[0].components["judge/task_completion"] == 10.0
    task.close()
    fresh.close()


def test_states_of_one_rollout_are_dropped_when_the_next_starts(sandbox, tmp_path: Path) -> None:
    """Workspaces were kept for the whole run: a long training run filled the disk one tree at a time."""
    probs = problems("improve-fib")
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=3), root=str(tmp_path / "ws"))
    first = rollout(task, probs, "align")[0]
    dirs = tree_dirs(first)
    assert len(dirs) > 1 and all(d.exists() for d in dirs)
    again = rollout(task, probs, "align")[0]
    assert not any(d.exists() for d in dirs)  # the first rollout's workspaces are gone
    assert len(tree_dirs(again)) == len(dirs) and all(d.exists() for d in tree_dirs(again))
    assert again.rewards == first.rewards
    task.close()
    assert not any(d.exists() for d in tree_dirs(again))


def tree_dirs(root) -> set[Path]:
    """The workspace directories of every state a tree's nodes hold (the states their turns act on and leave)."""
    return {st.dir for node in root.walk() for st in (node.state, *node.next_states)}


def test_next_prompts_continue_the_chat_with_observations(sandbox, tmp_path: Path) -> None:
    probs = problems("ts-service-cache")
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=3), root=str(tmp_path / "ws"))
    root = rollout(task, probs, "align")[0]
    child = root.children[0]
    for a in range(2):
        msgs, first = child.messages[a], root.messages[a]
        # the chat continues: system prompt, the demonstration exchange, the first user turn, unchanged
        assert msgs[:len(first)] == first
        assert [m["role"] for m in first] == ["system", "user", "assistant", "user", "assistant", "user"]
        assert first[-1]["content"].startswith(probs[0].prompt)
        assert [m["role"] for m in msgs[len(first):]] == ["assistant", "user"]
        assert msgs[-2]["content"] == root.completions[a][0].text  # the agent's own answer
        assert "Results of turn 1:" in msgs[-1]["content"] and '"degraded"' in msgs[-1]["content"]
        assert "fix the root cause now" in msgs[-1]["content"]  # the pattern's scripted follow-up
        assert msgs[-1]["content"].endswith("Reply with your JSON action in a ```json block first.")
    assert "action error (no_action)" in root.children[1].messages[0][-1]["content"]
    assert "http://status.shop.test" in root.messages[0][0]["content"]  # the allowed host is announced
    assert "complete_task(summary: string)" in root.messages[1][0]["content"]
    # turn 1 ends with the format on the task's own resources (here its API), in the demonstration's form
    assert root.messages[0][-1]["content"].endswith(
        '```json\n{"action": "api_call", "method": "GET", "url": "http://status.shop.test/"}\n```')
    task.close()


def test_reward_parts(sandbox, tmp_path: Path) -> None:
    prob = problems("improve-fib")[0]
    task = ActionsTask(sandbox, ActionsTaskConfig(max_turns=3, action_reward=0.1, format_penalty=0.3),
                       root=str(tmp_path / "ws"))
    read = act("read_file", path="fib.py")
    r1 = task.score_paths([(prob, [read, BAD], ())])[0]
    assert r1.components["actions"] == pytest.approx(0.1) and r1.components["format"] == pytest.approx(-0.3)
    assert r1.total == pytest.approx(-0.2) and not r1.done and r1.judge is None
    r2 = task.score_paths([(prob, [read, read], ((read, BAD),))])[0]  # repeats earn nothing
    assert r2.components["actions"] == 0.0 and r2.components["actions_ok"] == 2.0
    r3 = task.score_paths([(prob, [act("read_file", path="missing.py"), DONE], ((read, BAD), (read, read)))])[0]
    assert r3.done and r3.components["actions_failed"] == 1 and r3.judge is not None
    assert r3.components["judge/task_completion"] == 0.0  # the checks fail
    after = task.score_paths([(prob, [read, read], ((read, BAD), (read, read),
                                                    (act("read_file", path="missing.py"), DONE)))])[0]
    assert after.total == 0.0 and after.components["after_done"] == 1.0
    lo, hi = task.reward_range
    assert lo == pytest.approx(-0.6) and hi == pytest.approx(2 * 3 * 0.1 + 2.0)
    task.close()


def test_build_task_from_config(sandbox) -> None:
    cfg = load_config("configs/actions_T4_G2.yaml", ["task.actions.action_reward=0.1", "magrpo.num_turns=3"])
    assert cfg.task.actions.max_turns == 3  # null resolves to magrpo.num_turns
    task = build_task(cfg.task, sandbox)
    assert isinstance(task, ActionsTask) and task.num_agents == 2 and task.max_turns == 3
    train, evals = task.load(cfg.dataset)
    assert len(train) + len(evals) == 12 and len(evals) == 3
    task.close()
    for bad, key in [("task.actions.format_penalty=-1", "task.actions.format_penalty"),
                     ("task.actions.max_actions_per_turn=0", "task.actions.max_actions_per_turn"),
                     ("magrpo.num_agents=1", "magrpo.num_agents")]:
        with pytest.raises(ConfigError, match=key):
            load_config("configs/actions_T4_G2.yaml", [bad])
    with pytest.raises(ConfigError, match="^config error: plugins: cannot import 'no_such_module_xyz'"):
        load_config("configs/actions_T4_G2.yaml", ["plugins=[no_such_module_xyz]"])
    cfg = load_config("configs/actions_T4_G2.yaml", ["task.actions.judge=openai:gpt-4o-mini"])
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_task(cfg.task, sandbox)


def test_head_messages_end_with_the_task_so_history_cuts_keep_it(tmp_path: Path) -> None:
    (prob,) = problems("improve-fib")
    task = ActionsTask(None, ActionsTaskConfig(max_turns=3), root=str(tmp_path / "ws"))
    for msgs in task.initial_messages(prob):
        assert len(msgs) == task.head_messages  # system, the demonstration, the task's first turn
        assert msgs[0]["role"] == "system" and msgs[-1]["role"] == "user"
        assert msgs[-1]["content"].startswith(prob.prompt)
