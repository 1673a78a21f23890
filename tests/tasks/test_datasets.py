"""Loading HumanEval-format data sets and the deterministic train/eval split."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from comlrl.tasks.base import Problem
from comlrl.tasks.datasets import (
    DatasetConfig,
    DatasetError,
    load_dataset,
    load_easy,
    load_humaneval,
    load_jsonl,
    load_problems,
    split_problems,
)

DS = DatasetConfig


def record(i: int, **over: object) -> dict[str, object]:
    r: dict[str, object] = {
        "task_id": f"T/{i}",
        "prompt": f'def f{i}(x):\n    """Return x."""\n',
        "entry_point": f"f{i}",
        "test": "def check(candidate):\n    assert candidate(1) == 1\n",
        "canonical_solution": "    return x\n",
    }
    r.update(over)
    return r


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def problems(n: int) -> list[Problem]:
    return [Problem(f"T/{i}", f"def f{i}():\n    pass\n", f"f{i}", "def check(c):\n    pass\n") for i in range(n)]


# --- sources ------------------------------------------------------------------------------------------


def test_humaneval_from_installed_package() -> None:
    he = load_humaneval()
    assert len(he) == 164
    assert he[0].task_id == "HumanEval/0" and he[0].entry_point == "has_close_elements"
    assert all(p.canonical_solution for p in he)


def test_easy_set_is_packaged_and_well_formed() -> None:
    easy = load_easy()
    assert 55 <= len(easy) <= 75
    assert len({p.task_id for p in easy}) == len(easy)
    assert len({p.entry_point for p in easy}) == len(easy)
    for p in easy:
        assert p.prompt.startswith(f"def {p.entry_point}("), p.task_id
        assert f">>> {p.entry_point}(" in p.prompt, p.task_id  # an example in the docstring
        assert p.test.startswith("def check(candidate):"), p.task_id
        assert p.test.count("assert ") >= 4, p.task_id
        assert p.canonical_solution, p.task_id


def test_jsonl_roundtrip_plain_and_gzip(tmp_path: Path) -> None:
    rows = [record(i) for i in range(3)]
    plain = load_jsonl(write_jsonl(tmp_path / "d.jsonl", rows))
    gz = tmp_path / "d.jsonl.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
    assert load_jsonl(gz) == plain
    assert plain[1] == Problem("T/1", rows[1]["prompt"], "f1", rows[1]["test"], "    return x\n")  # type: ignore[arg-type]


def test_jsonl_blank_lines_skipped_and_solution_optional(tmp_path: Path) -> None:
    r = record(0)
    del r["canonical_solution"]
    path = tmp_path / "d.jsonl"
    path.write_text("\n" + json.dumps(r) + "\n\n   \n" + json.dumps(record(1)) + "\n")
    got = load_jsonl(path)
    assert [p.task_id for p in got] == ["T/0", "T/1"]
    assert got[0].canonical_solution is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"task_id": "T/1", "prompt": "p", "test": "t"}, ":2: missing field 'entry_point'"),
        ({"task_id": "T/1", "prompt": "p", "entry_point": "f"}, ":2: missing field 'test'"),
        ({"task_id": "T/1", "prompt": 3, "entry_point": "f", "test": "t"},
         ":2: field 'prompt' must be a non-empty string"),
        ({"task_id": "T/1", "prompt": "p", "entry_point": "not valid", "test": "t"},
         ":2: field 'entry_point' must be a Python identifier"),
        (record(1, canonical_solution=5), ":2: field 'canonical_solution' must be a string or null"),
        ([1, 2], ":2: expected a JSON object, got list"),
        (record(0), ":2: duplicate task_id 'T/0' (first on line 1)"),
    ],
)
def test_jsonl_bad_records_name_file_line_and_field(tmp_path: Path, bad: object, message: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [record(0), bad])
    with pytest.raises(DatasetError) as err:
        load_jsonl(path)
    text = str(err.value)
    assert text.startswith(str(path) + ":2: ")
    assert message in text
    assert "\n" not in text


def test_jsonl_invalid_json_names_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record(0)) + "\n\n{not json\n")
    with pytest.raises(DatasetError, match=r"bad\.jsonl:3: invalid JSON"):
        load_jsonl(path)


def test_jsonl_missing_empty_and_binary_files(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_jsonl(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(DatasetError, match="empty.jsonl: no problems found"):
        load_jsonl(tmp_path / "empty.jsonl")
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(DatasetError, match="bin.jsonl: cannot read file"):
        load_jsonl(tmp_path / "bin.jsonl")


def test_load_problems_by_name(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(i) for i in range(4)])
    assert len(load_problems("jsonl", path)) == 4
    assert len(load_problems("easy")) == len(load_easy())
    with pytest.raises(DatasetError, match="dataset.path: required"):
        load_problems("jsonl", None)
    with pytest.raises(DatasetError, match="dataset.name: unknown data set 'mbpp'"):
        load_problems("mbpp")


# --- split --------------------------------------------------------------------------------------------


def test_split_is_deterministic_disjoint_and_complete() -> None:
    ps = problems(40)
    train, evals = split_problems(ps, 10, seed=3)
    assert (train, evals) == split_problems(ps, 10, seed=3)
    assert len(evals) == 10 and len(train) == 30
    assert {p.task_id for p in train} | {p.task_id for p in evals} == {p.task_id for p in ps}
    assert not {p.task_id for p in train} & {p.task_id for p in evals}
    # both sides keep file order
    assert train == sorted(train, key=ps.index) and evals == sorted(evals, key=ps.index)


def test_split_depends_on_seed_and_is_not_a_prefix() -> None:
    ps = problems(40)
    e0 = split_problems(ps, 10, seed=0)[1]
    e1 = split_problems(ps, 10, seed=1)[1]
    assert e0 != e1
    assert e0 != ps[:10] and e0 != ps[-10:]


def test_split_is_stable_when_problems_are_added() -> None:
    ps = problems(40)
    evals = split_problems(ps, 10, seed=0)[1]
    bigger = split_problems(ps + problems(41)[40:], 10, seed=0)[1]
    assert len(set(evals) & set(bigger)) >= 9  # the new problem can take at most one eval slot


def test_split_zero_eval_and_bad_sizes() -> None:
    ps = problems(5)
    assert split_problems(ps, 0) == (ps, [])
    with pytest.raises(DatasetError, match="dataset.eval_size: 5 leaves no training problems"):
        split_problems(ps, 5)
    with pytest.raises(DatasetError, match="dataset.eval_size: must be >= 0"):
        split_problems(ps, -1)


def test_load_dataset_easy_defaults() -> None:
    train, evals = load_dataset(DS())
    assert len(evals) == 8
    assert len(train) + len(evals) == len(load_easy())


def test_max_problems_caps_train_only(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [record(i) for i in range(30)])
    full_train, full_eval = load_dataset(DS(name="jsonl", path=str(path), eval_size=5, seed=7))
    train, evals = load_dataset(DS(name="jsonl", path=str(path), eval_size=5, seed=7, max_problems=4))
    assert evals == full_eval
    assert train == full_train[:4]
    with pytest.raises(DatasetError, match="max_problems"):
        load_dataset(DS(max_problems=0))


def test_load_dataset_reads_the_dataset_section() -> None:
    train, evals = load_dataset(DatasetConfig(name="humaneval", eval_size=20, max_problems=10, seed=1))
    assert len(train) == 10 and len(evals) == 20


@pytest.mark.parametrize("line,column,msg", [
    ('{"task_id": "t", "prompt": "p"', 31, "Expecting ',' delimiter"),  # unclosed at the end of the line
    ('{"task_id": "t",}', 17, "Expecting property name enclosed in double quotes"),
    ('{"task_id" "t"}', 12, "Expecting ':' delimiter"),
    ('{"task_id": "t', 13, "Unterminated string starting at"),  # read as "...starting at: column 13", once "at at"
])
def test_jsonl_syntax_error_reports_the_column_json_reports(tmp_path: Path, line: str, column: int, msg: str) -> None:
    """The line's own column, as `json` gives it for the line alone (its newline once made it `line 2 column 1`)."""
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(record(0)) + "\n" + line + "\n" + json.dumps(record(1)) + "\n")
    with pytest.raises(json.JSONDecodeError) as ref:
        json.loads(line)
    assert (ref.value.colno, ref.value.msg) == (column, msg)
    with pytest.raises(DatasetError) as err:
        load_jsonl(path)
    assert str(err.value) == f"{path}:2: invalid JSON ({msg}: column {column})"


def test_an_eval_path_holds_out_all_of_its_problems_and_trains_on_all_of_path(tmp_path: Path) -> None:
    """A TRL user's eval_dataset: the held-out problems are that file, not a split of the training file."""
    train = write_jsonl(tmp_path / "train.jsonl", [record(i) for i in range(5)])
    held = write_jsonl(tmp_path / "held.jsonl", [record(i) for i in range(10, 13)])
    got_train, got_eval = load_dataset(DS(name="jsonl", path=str(train), eval_path=str(held), eval_size=2,
                                          max_problems=4))
    assert [p.task_id for p in got_train] == ["T/0", "T/1", "T/2", "T/3"]  # max_problems still caps training
    assert [p.task_id for p in got_eval] == ["T/10", "T/11", "T/12"]


def test_an_eval_path_needs_a_table_to_hold_out_from() -> None:
    from comlrl.config.schema import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"^config error: dataset.eval_path='h.jsonl' is not allowed; expected null "
                                          r"unless dataset.name is jsonl or hf with a dataset.path"):
        load_config(None, ["dataset.eval_path=h.jsonl"])


def test_a_test_that_does_not_parse_is_one_line_naming_its_line_at_load(tmp_path: Path) -> None:
    """Before: the run trained until a policy first wrote code that compiled for that problem, then stopped with a
    traceback. Now the file is refused at load, naming the line and the field."""
    broken = "def check(candidate):\n    assert candidate(1) ==\n"
    path = write_jsonl(tmp_path / "d.jsonl", [record(0), record(1, test=broken)])
    with pytest.raises(DatasetError) as exc:
        load_jsonl(path)
    assert str(exc.value) == f"{path}:2: field 'test' does not parse: line 2: invalid syntax"
    null_byte = r"d.jsonl:1: field 'test' does not parse: source code string cannot contain null bytes$"
    with pytest.raises(DatasetError, match=null_byte):
        load_jsonl(write_jsonl(path, [record(0, test="assert f0(1) == 1\x00")]))


def test_a_problems_tests_are_parsed_once_at_load_and_read_from_there() -> None:
    from comlrl.tasks.dataset_files import parsed_tests

    parsed_tests.cache_clear()
    easy = load_easy()
    after_load = parsed_tests.cache_info()
    assert after_load.currsize == len(easy) and after_load.misses == len(easy)
    from comlrl.tasks.code.collab import CodeCollabTask

    task = CodeCollabTask.__new__(CodeCollabTask)  # tests_for reads no state of the task
    assert task.tests_for(easy[0]) is parsed_tests(easy[0].test, easy[0].entry_point, easy[0].prompt)
    assert parsed_tests.cache_info().misses == len(easy)
