"""`task.name=text`: N agents answer the prompt of every row of any table, scored by reward functions.

The rows come from `dataset.name=hf` (`dataset.path`: a JSON/JSONL/parquet/CSV file or a `save_to_disk`
folder; the Python API writes an in-memory list of dicts there). `dataset.fields.prompt` names the prompt
column: a string, or chat messages (`[{"role": "user", "content": ...}]`); `dataset.fields.task_id` the id
column (without one, the row's index from 0; errors count rows from 1, as the other loaders do). Every other
column goes to the reward functions (`task.reward_funcs`, comlrl/tasks/reward_funcs.py) as keyword arguments, as
TRL passes them; the task itself scores 0, so its reward is the sum of their weighted terms.

Agents are named by `task.text.roles`; each sees the prompt (with its `task.text.instructions` line, after
`task.text.system_prompt`). From turn 2 each agent sees its own answer, its teammates' answers and their
score, and answers again. `task.text.pass_threshold` decides which joint actions count as passed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks.base import TaskDefaults
from comlrl.tasks.datasets import DatasetConfig, DatasetError, train_and_held_out
from comlrl.tree.contracts import Continuation, Messages, Task, TaskConfig, Transition
from feedback.context import cap

ANSWER_CHARS = 2000  # a teammate's answer shown in the next turn's prompt (head and tail kept)


@dataclass
class TextTaskConfig:
    """Options of task.name=text: N agents answer each row's prompt, scored by task.reward_funcs
    (docs/reward-functions.md)."""

    roles: list[str] = field(default_factory=lambda: ["answerer"])  # one name per agent (= magrpo.num_agents)
    instructions: list[str] | None = None  # per agent, a line after the prompt (its role); null = none
    system_prompt: str | None = None  # a system message before every agent's prompt; null = none
    pass_threshold: float | None = None  # a joint action passes (pass rates, eval pass@1) at total >= this


@dataclass(frozen=True)
class TextProblem:
    """One row: its id, its prompt (text or chat messages) and every other column."""

    task_id: str
    prompt: str | list[dict[str, str]]
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TextReward:
    """The text task's own reward: 0, with the reward functions' terms added (`Task.score_joint`)."""

    total: float
    components: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    pass_threshold: float | None = None

    @property
    def all_passed(self) -> bool:
        """The total reached task.text.pass_threshold (never, without one)."""
        return self.pass_threshold is not None and self.total >= self.pass_threshold

    @property
    def scored(self) -> tuple[str, ...]:
        return self.texts


def _prompt(value: Any, where: str, column: str) -> str | list[dict[str, str]]:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Sequence) and not isinstance(value, str) and value and all(
            isinstance(m, Mapping) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in value):
        return [{"role": m["role"], "content": m["content"]} for m in value]
    raise DatasetError(f"{where}: field '{column}' (dataset.fields.prompt) must be a non-empty string or a list of "
                       f"chat messages ({{'role', 'content'}}), got {type(value).__name__}")


def rows_to_problems(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fields: Any,
                     source: str) -> list[TextProblem]:
    """Problems from table rows: the prompt column, the id column (or row numbers), the rest as columns."""
    if fields.prompt not in columns:
        raise DatasetError(f"{source}: dataset.fields.prompt={fields.prompt!r} is not a column; the columns are: "
                           f"{', '.join(columns)}")
    id_column = fields.task_id if fields.task_id in columns else None
    if fields.task_id not in (None, "task_id") and id_column is None:
        raise DatasetError(f"{source}: dataset.fields.task_id={fields.task_id!r} is not a column; the columns are: "
                           f"{', '.join(columns)}")
    out: list[TextProblem] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        where = f"{source}: row {i + 1}"  # counted from 1, as comlrl/tasks/hf_dataset.py and the jsonl loader count
        task_id = str(row[id_column]) if id_column else str(i)
        if task_id in seen:
            raise DatasetError(f"{where}: duplicate task_id {task_id!r} (first in row {seen[task_id]})")
        seen[task_id] = i + 1
        rest = {k: v for k, v in row.items() if k != fields.prompt}  # TRL: every column but the prompt
        out.append(TextProblem(task_id, _prompt(row[fields.prompt], where, fields.prompt),
                               {"task_id": task_id, **rest}))
    if not out:
        raise DatasetError(f"{source}: no rows found (empty table)")
    return out


class TextTask(TaskDefaults):
    """N agents answer prompts; the reward is the configured reward functions' (TRL convention)."""

    needs_reward_funcs = True  # its reward comes only from task.reward_funcs
    needs_sandbox = False  # the reward functions run in this process (the user's own code)

    num_agents = 1
    role_names = ["answerer"]
    reward_range = (0.0, 0.0)  # the task adds nothing; the reward functions' terms are open-ended

    options_type = TextTaskConfig  # task.text.*
    centralizable = True  # the answers only meet in the reward functions and the next turn's prompt

    def __init__(self, text_cfg: TextTaskConfig) -> None:
        self.cfg = text_cfg
        self.role_names = list(text_cfg.roles)
        self.num_agents = len(self.role_names)

    @classmethod
    def validate_options(cls, options: TextTaskConfig) -> None:
        """task.text.*: a role per agent, an instruction per role, a finite pass threshold."""
        x = options
        if not x.roles or not all(isinstance(r, str) and r.strip() for r in x.roles):
            raise ConfigError(f"config error: task.text.roles={x.roles!r} is not allowed; expected a non-empty list of "
                              "role names (one per agent)")
        if x.instructions is not None and len(x.instructions) != len(x.roles):
            raise ConfigError(f"config error: task.text.instructions has {len(x.instructions)} entries; expected "
                              f"{len(x.roles)} (one per task.text.roles entry) or null")
        if x.pass_threshold is not None and not math.isfinite(x.pass_threshold):
            raise ConfigError(f"config error: task.text.pass_threshold={x.pass_threshold!r} is not allowed; expected a "
                              "finite number or null")

    @classmethod
    def agents_for(cls, task_cfg: TaskConfig) -> int:
        return len((task_cfg.options() or TextTaskConfig()).roles)

    @classmethod
    def roles_for(cls, task_cfg: TaskConfig) -> list[str]:
        return list((task_cfg.options() or TextTaskConfig()).roles)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> TextTask:
        """A run without reward functions is refused before this (`comlrl.config.checks.check_runnable`; a
        config may get them later: the Python API's `train(cfg, reward_funcs=...)`)."""
        return cls(task_cfg.options() or TextTaskConfig())

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[TextProblem], list[TextProblem]]:
        if dataset_cfg.name not in ("hf", "jsonl") or not dataset_cfg.path:
            raise DatasetError(f"dataset.name={dataset_cfg.name!r}: task.name=text reads a table of rows; set "
                               "dataset.name=hf and dataset.path (a JSON/JSONL/parquet/CSV file or a save_to_disk "
                               "folder), or pass the rows to comlrl.train(dataset=...)")
        from comlrl.tasks.hf_dataset import read_table

        def read(path: str) -> list[TextProblem]:
            table = read_table(path, dataset_cfg.split)
            return rows_to_problems(table, list(table.column_names), dataset_cfg.fields, path)

        return train_and_held_out(dataset_cfg, read)

    def role_instructions(self, agent: int) -> str:
        return self.cfg.instructions[agent] if self.cfg.instructions else ""

    def problem_id(self, problem: TextProblem) -> str:
        """The row's id column (dataset.fields.task_id), else its position in the table (from 0)."""
        return problem.task_id

    def initial_messages(self, problem: TextProblem) -> list[Messages]:
        """Per agent: the system prompt, then the row's prompt with the agent's instruction after it."""
        head = [{"role": "system", "content": self.cfg.system_prompt}] if self.cfg.system_prompt else []
        out = []
        for agent in range(self.num_agents):
            chat = ([{"role": "user", "content": problem.prompt}] if isinstance(problem.prompt, str)
                    else [dict(m) for m in problem.prompt])
            extra = self.role_instructions(agent)
            if extra and chat[-1]["role"] == "user":
                chat[-1] = {"role": "user", "content": f"{chat[-1]['content']}\n\n{extra}"}
            elif extra:
                chat.append({"role": "user", "content": extra})
            has_system = chat[0]["role"] == "system"
            out.append(chat if has_system else [*head, *chat])
        return out

    def score(self, items: list[tuple[Any, list[str]]]) -> list[TextReward]:
        return [TextReward(0.0, texts=tuple(texts), pass_threshold=self.cfg.pass_threshold) for _, texts in items]

    def reward_inputs(self, problem: TextProblem) -> tuple[Any, dict[str, Any]]:
        return problem.prompt, dict(problem.columns)

    def transition(self, configured: Transition) -> Transition:
        return self  # the team's answers and their score make the next turn, not the code feedback modes

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """Per agent: its first chat, its last answer, then the team's answers and their score."""
        out = []
        for path in paths:
            latest = [turns[-1] for turns in path.history]
            chats = []
            for a, first in enumerate(self.initial_messages(path.problem)):
                team = "".join(f"\n\n{self.role_names[b]}'s answer:\n{cap(text, ANSWER_CHARS)}"
                               for b, text in enumerate(latest) if b != a)
                who = "Your team's answers" if team else "Your answer"
                note = f"{who} scored {path.reward.total:.3g} (higher is better).{team}\n\nGive an improved answer."
                chats.append([*first, {"role": "assistant", "content": latest[a]}, {"role": "user", "content": note}])
            out.append(chats)
        return out
