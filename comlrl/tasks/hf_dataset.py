"""`dataset.name=hf`: coding problems from any table the `datasets` library reads, with a field mapping.

    dataset.path: a `save_to_disk` directory, a .parquet / .json / .jsonl / .csv file (or a directory of
                  them), or a hub id (only when online)
    dataset.fields.{prompt, entry_point, tests, task_id}: the column holding each part

so MBPP-, HumanEval- or APPS-style sets train as they are: `tests` may be one string (HumanEval's `check`
function, or assert lines) or a list of assert strings (MBPP's `test_list`), joined into one test string
the sandbox splits into assert units. `entry_point: null` takes the first function the tests call (MBPP
has no such column); `task_id: null` numbers the rows from 0 (the ids the train/eval split hashes). Bad data
is one line naming the file, row (counted from 1, as the jsonl loader counts lines) and field; a table with
no rows is one line too.
"""

from __future__ import annotations

import ast
import builtins
import gzip
import json
from collections.abc import Mapping, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

from comlrl.tasks.base import Problem
from comlrl.tasks.dataset_files import DatasetError, check_json_lines, checked_tests

FILE_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv"}
EMPTY = "no problems found (empty table)"


def read_table(path: str, split: str = "train") -> Any:
    """A `datasets.Dataset` from a saved directory, a data file (or a folder of them) or a hub id."""
    import datasets

    datasets.disable_progress_bars()  # a local file loads in a blink; bars would only clutter the log
    p = Path(path).expanduser()
    saved = p.is_dir() and ((p / "state.json").is_file() or (p / "dataset_dict.json").is_file())
    builder = None
    if p.is_file():
        builder = FILE_BUILDERS.get(Path(p.name.removesuffix(".gz")).suffix)
        if builder is None:
            raise DatasetError(f"{p}: unknown data file type; expected {', '.join(FILE_BUILDERS)} (optionally "
                               ".gz) or a save_to_disk directory")
        if _is_empty(p, builder):  # the library fails on these with StopIteration or "no data"
            raise DatasetError(f"{path}: {EMPTY}")
        if Path(p.name.removesuffix(".gz")).suffix == ".jsonl":
            check_json_lines(p)
    if saved and _saved_is_empty(p):
        raise DatasetError(f"{path}: {EMPTY}")
    try:
        if saved:
            ds = datasets.load_from_disk(str(p))
        elif builder is not None:
            return datasets.load_dataset(builder, data_files=str(p), split="train")
        else:
            return datasets.load_dataset(str(p) if p.is_dir() else path, split=split)
    except Exception as exc:  # noqa: BLE001 - the library raises many kinds; all become one line
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise DatasetError(f"{path}: cannot load with the datasets library ({type(exc).__name__}: {first})") from None
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise DatasetError(f"{p}: no split {split!r} (dataset.split); it has: {', '.join(ds)}")
        ds = ds[split]
    return ds


def _is_empty(path: Path, builder: str) -> bool:
    """A data file with no rows: only whitespace (a csv: at most its header), or a parquet of 0 rows."""
    if builder == "parquet":
        import pyarrow.parquet as pq

        try:
            return pq.read_metadata(path).num_rows == 0
        except Exception:  # noqa: BLE001 - not a readable parquet: the library says why
            return False
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        rows = len(list(islice((line for line in f if line.strip()), 2)))
    return rows <= (1 if builder == "csv" else 0)


def _saved_is_empty(path: Path) -> bool:
    """A save_to_disk Dataset of 0 rows (its state.json lists no data file; `load_from_disk` fails on it)."""
    state = path / "state.json"
    return state.is_file() and not json.loads(state.read_text()).get("_data_files", [None])


def called_names(tests: str) -> list[str]:
    """Names of the plain functions the tests call, in order (builtins and `candidate` left out)."""
    try:
        tree = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    calls = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    out: list[str] = []
    for call in calls:
        name = call.func.id  # type: ignore[attr-defined]
        if name in ("candidate", "check") or name in defined or hasattr(builtins, name) or name in out:
            continue
        out.append(name)
    return out


def _tests_text(value: Any, where: str, column: str) -> str:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, Sequence) and not isinstance(value, str) and value and all(
            isinstance(t, str) and t.strip() for t in value):
        return "\n".join(t.rstrip() for t in value) + "\n"
    raise DatasetError(f"{where}: field '{column}' (dataset.fields.tests) must be a non-empty string or a list of "
                 f"assert strings, got {type(value).__name__}")


def problems_from_rows(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], fields: Any,
                       source: str) -> list[Problem]:
    """Problems from table rows under the field mapping; checks the mapping against `columns` first."""
    for key, column in (("prompt", fields.prompt), ("entry_point", fields.entry_point), ("tests", fields.tests),
                        ("task_id", fields.task_id)):
        if column is not None and column not in columns:
            raise DatasetError(f"{source}: dataset.fields.{key}={column!r} is not a column; the columns are: "
                         f"{', '.join(columns)}")
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        where = f"{source}: row {i + 1}"  # counted from 1, as the jsonl loader counts lines
        prompt = row[fields.prompt]
        if not isinstance(prompt, str) or not prompt.strip():
            raise DatasetError(f"{where}: field '{fields.prompt}' (dataset.fields.prompt) must be a non-empty string")
        tests = _tests_text(row[fields.tests], where, fields.tests)
        if fields.entry_point is not None:
            entry = row[fields.entry_point]
        else:
            names = called_names(tests)
            if not names:  # tests that do not parse say so, not "no function called"
                checked_tests(tests, None, prompt, where)
            entry = names[0] if names else None
            if entry is None:
                raise DatasetError(f"{where}: the tests call no function to take as the entry point; set "
                             "dataset.fields.entry_point")
        if not isinstance(entry, str) or not entry.isidentifier():
            raise DatasetError(f"{where}: entry point {entry!r} (dataset.fields.entry_point) "
                               "is not a Python identifier")
        checked_tests(tests, entry, prompt, where)
        task_id = str(row[fields.task_id]) if fields.task_id is not None else str(i)
        if task_id in seen:
            raise DatasetError(f"{where}: duplicate task_id {task_id!r} (first in row {seen[task_id]})")
        seen[task_id] = i + 1
        problems.append(Problem(task_id=task_id, prompt=prompt, entry_point=entry, test=tests))
    if not problems:
        raise DatasetError(f"{source}: {EMPTY}")
    return problems


def load_hf(path: str, fields: Any, split: str = "train") -> list[Problem]:
    """All problems of the table at `path` (see the module docstring)."""
    ds = read_table(path, split)
    return problems_from_rows(ds, list(ds.column_names), fields, str(path))
