"""A scripted rollout through the trainer's real `Rollout`: sample 0 follows the reference solution."""

from __future__ import annotations

from types import SimpleNamespace

from act_refs import DONE, REFERENCE, locate

from comlrl.tasks.actions import ActionsTask, bundled_tasks_path, load_action_tasks
from comlrl.tree.rollout import Rollout, TreeShape

BAD = "I am not sure what to do here."


def problems(*ids: str):
    by_id = {p.task_id: p for p in load_action_tasks(bundled_tasks_path())}
    return [by_id[i] for i in ids]


class ScriptedPolicies:
    """Sample 0 follows the reference solution, sample 1 answers without an action."""

    def __init__(self, probs) -> None:
        self.by_prompt = {p.prompt: p.task_id for p in probs}

    def generate(self, requests, n, greedy=False):
        out = []
        for agent, msgs in requests:
            task_id, turn = locate(msgs, self.by_prompt)
            ref = REFERENCE[task_id]
            good = ref[turn - 1][agent] if turn <= len(ref) else DONE
            texts = [good, BAD][:n] + [BAD] * max(0, n - 2)
            out.append([SimpleNamespace(text=t, completion_ids=(1,)) for t in texts])
        return out

    def report_truncations(self, label: str) -> None:  # no prompt is cut here
        pass


def rollout(task: ActionsTask, probs, mode: str, turns: int = 3):
    scripted = ScriptedPolicies(probs)  # the rollout engine (and the policies) of this scripted run
    r = Rollout(task, task.transition(None), scripted, probs)  # type: ignore[arg-type]  # the task's own transition
    return r.run(TreeShape(2, 2, turns, mode, None), tag="")


def paths(root):
    """(node, joint index, history before the node) for every joint action of a tree."""
    out = []

    def walk(node, history):
        for j in range(len(node.joint)):
            out.append((node, j, history))
        for j, child in node.children.items():
            texts = tuple(node.completions[a][node.joint[j][a]].text for a in range(2))
            walk(child, (*history, texts))

    walk(root, ())
    return out
