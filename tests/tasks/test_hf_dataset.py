"""`dataset.name=hf`: parquet, MBPP-style JSONL and saved datasets through the `datasets` library.

The files are written here (no hub access). A problem loaded that way is scored by the real sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError, load_config
from comlrl.tasks import CodeSingleTask
from comlrl.tasks.datasets import DatasetError, load_dataset
from comlrl.tasks.hf_dataset import called_names

datasets = pytest.importorskip("datasets")

HUMANEVAL_STYLE = [
    {"id": f"P/{i}", "question": f'def {name}(a, b):\n    """{doc}"""\n', "fn": name,
     "check": f"def check(candidate):\n    assert candidate(2, 3) == {want}\n    assert candidate(0, 0) == 0\n"}
    for i, (name, doc, want) in enumerate([("add", "Sum.", 5), ("mul", "Product.", 6), ("sub", "Difference.", -1)])
]
# MBPP's columns: no entry point, the tests a list of assert strings.
MBPP = [
    {"task_id": 11, "text": "Write a python function to remove first and last occurrence of a given character "
     "from the string.", "code": "def remove_Occ(s,ch): \r\n    s = s.replace(ch,'',1)\r\n"
                                 "    s = s[::-1].replace(ch,'',1)[::-1]\r\n    return s",
     "test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"',
                   'assert remove_Occ("PHP","P") == "H"'], "test_setup_code": "", "challenge_test_list": []},
    {"task_id": 12, "text": "Write a function to sort a given matrix in ascending order according to the sum of "
     "its rows.", "code": "def sort_matrix(M):\r\n    result = sorted(M, key=sum)\r\n    return result",
     "test_list": ["assert sort_matrix([[1, 2, 3], [2, 4, 5], [1, 1, 1]])==[[1, 1, 1], [1, 2, 3], [2, 4, 5]]",
                   "assert sort_matrix([[1, 2, 3], [-2, 4, -5], [1, -1, 1]])==[[-2, 4, -5], [1, -1, 1], [1, 2, 3]]"],
     "test_setup_code": "", "challenge_test_list": []},
    {"task_id": 13, "text": "Write a function to find the number of ways to fill it with 2 x 1 dominoes.",
     "code": "def count_ways(n):\n    return 3 if n == 2 else 0\n",
     "test_list": ["assert count_ways(2) == 3", "assert len(str(count_ways(8))) == 1"],
     "test_setup_code": "", "challenge_test_list": []},
]
MBPP_FIELDS = ["dataset.fields.prompt=text", "dataset.fields.tests=test_list", "dataset.fields.entry_point=null"]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def load(path: Path | str, *overrides: str):  # noqa: ANN201 - (train, eval)
    cfg = load_config(None, ["dataset.name=hf", f"dataset.path={path}", "dataset.eval_size=1", *overrides])
    return load_dataset(cfg.dataset)


def test_parquet_with_a_field_mapping(tmp_path: Path) -> None:
    path = tmp_path / "he.parquet"
    datasets.Dataset.from_list(HUMANEVAL_STYLE).to_parquet(str(path))
    train, evals = load(path, "dataset.fields.prompt=question", "dataset.fields.entry_point=fn",
                        "dataset.fields.tests=check", "dataset.fields.task_id=id")
    problems = {p.task_id: p for p in train + evals}
    assert sorted(problems) == ["P/0", "P/1", "P/2"] and len(evals) == 1
    p = problems["P/1"]
    assert (p.prompt, p.entry_point, p.test) == (HUMANEVAL_STYLE[1]["question"], "mul", HUMANEVAL_STYLE[1]["check"])


def test_mbpp_style_jsonl_lists_of_asserts_and_no_entry_point(tmp_path: Path) -> None:
    train, evals = load(write_jsonl(tmp_path / "mbpp.jsonl", MBPP), *MBPP_FIELDS)
    problems = {p.task_id: p for p in train + evals}
    assert sorted(problems) == ["11", "12", "13"]
    p = problems["11"]
    assert p.entry_point == "remove_Occ" and p.prompt == MBPP[0]["text"]
    assert p.test == "\n".join(MBPP[0]["test_list"]) + "\n"
    assert problems["12"].entry_point == "sort_matrix" and problems["13"].entry_point == "count_ways"


def test_saved_dataset_dict_split_and_row_numbers(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "id"} for r in HUMANEVAL_STYLE]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "saved"))
    common = ["dataset.fields.prompt=question", "dataset.fields.entry_point=fn", "dataset.fields.tests=check",
              "dataset.fields.task_id=null"]
    train, evals = load(tmp_path / "saved", *common, "dataset.split=test")
    assert sorted(p.task_id for p in train + evals) == ["0", "1", "2"]
    with pytest.raises(DatasetError, match=r"saved: no split 'train' \(dataset.split\); it has: test$"):
        load(tmp_path / "saved", *common)


def test_mbpp_problem_scores_a_correct_solution_as_passing(tmp_path: Path) -> None:
    from sandbox.executor import Sandbox

    train, evals = load(write_jsonl(tmp_path / "mbpp.jsonl", MBPP), *MBPP_FIELDS)
    problems = {p.task_id: p for p in train + evals}
    with Sandbox(workers=1, timeout_s=5.0) as box:
        task = CodeSingleTask(box)
        items = [(problems[str(r["task_id"])], [f"```python\n{r['code']}\n```"]) for r in MBPP]
        wrong = (problems["12"], ["```python\ndef sort_matrix(M):\n    return M\n```"])
        *right, bad = task.score([*items, wrong])
    for r, row in zip(right, MBPP, strict=True):
        assert r.all_passed and r.tests_passed == r.tests_total == len(row["test_list"]), row["task_id"]
    assert not bad.all_passed and bad.tests_passed == 0 and bad.tests_total == 2


def test_bad_field_names_and_values_are_one_line(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mbpp.jsonl", MBPP)
    with pytest.raises(DatasetError) as exc:
        load(path, "dataset.fields.prompt=question", "dataset.fields.tests=test_list",
             "dataset.fields.entry_point=null")
    assert str(exc.value) == (f"{path}: dataset.fields.prompt='question' is not a column; the columns are: "
                              "task_id, text, code, test_list, test_setup_code, challenge_test_list")
    with pytest.raises(DatasetError, match=r"mbpp.jsonl: row 1: field 'code' \(dataset.fields.tests\) must be a "
                                           "non-empty string or a list of assert strings, got list"):
        write_jsonl(path, [{**MBPP[0], "code": ["assert 1", 2]}])
        load(path, "dataset.fields.prompt=text", "dataset.fields.tests=code", "dataset.fields.entry_point=null")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DatasetError, match=r"x.txt: unknown data file type"):
        load(tmp_path / "x.txt")
    with pytest.raises(DatasetError, match=r"^.*nowhere/at/all: cannot load with the datasets library"):
        load(tmp_path / "nowhere" / "at" / "all")
    for override, message in [
        ("dataset.path=null", "config error: dataset.path=None is not allowed; expected a save_to_disk directory"),
        ("dataset.fields.prompt=''", "config error: dataset.fields.prompt='' is not allowed; expected a column name"),
        ("dataset.fields.tests=null", "config error: dataset.fields.tests: "),
        ("dataset.fields.answer=x", "config error: dataset.fields.answer"),
    ]:
        with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
            load_config(None, ["dataset.name=hf", "dataset.path=x.parquet", override])


@pytest.mark.parametrize("tests,names", [
    ('assert remove_Occ("hello","l") == "heo"', ["remove_Occ"]),
    ("assert len(str(count_ways(8))) == 1\nassert f(1)", ["count_ways", "f"]),
    ("def check(candidate):\n    assert candidate(1) == helper(2)\n", ["helper"]),
    ("import math\nassert math.isclose(area(2), 12.56, rel_tol=0.01)", ["area"]),
    ("def helper(x):\n    return x\nassert sol(helper(1))", ["sol"]),
    ("assert (", []),
])
def test_called_names(tests: str, names: list[str]) -> None:
    assert called_names(tests) == names


def test_rows_in_errors_count_from_1_as_lines_do(tmp_path: Path) -> None:
    """Row n of a JSONL table is its line n: the same number the jsonl loader gives."""
    path = write_jsonl(tmp_path / "mbpp.jsonl", [MBPP[0], MBPP[1], {**MBPP[2], "task_id": 11}])
    with pytest.raises(DatasetError) as exc:
        load(path, *MBPP_FIELDS)
    assert str(exc.value) == f"{path}: row 3: duplicate task_id '11' (first in row 1)"
    write_jsonl(path, [MBPP[0], {**MBPP[1], "text": ""}])
    with pytest.raises(DatasetError, match=r"mbpp.jsonl: row 2: field 'text' \(dataset.fields.prompt\)"):
        load(path, *MBPP_FIELDS)


@pytest.mark.parametrize("kind", ["jsonl", "jsonl.gz", "csv", "parquet", "saved"])
def test_an_empty_table_is_one_line_naming_it(tmp_path: Path, kind: str) -> None:
    import gzip

    path = tmp_path / f"empty.{kind}"
    columns = {"prompt": [], "test": [], "entry_point": [], "task_id": []}
    if kind == "jsonl":
        path.write_text("\n")
    elif kind == "jsonl.gz":
        path.write_bytes(gzip.compress(b""))
    elif kind == "csv":
        path.write_text("prompt,test,entry_point,task_id\n")
    elif kind == "parquet":
        datasets.Dataset.from_dict(columns).to_parquet(str(path))
    else:
        datasets.Dataset.from_dict(columns).save_to_disk(str(path))
    with pytest.raises(DatasetError) as exc:
        load(path)
    assert str(exc.value) == f"{path}: no problems found (empty table)"


def test_a_malformed_jsonl_line_is_one_error_naming_file_and_line_from_one(tmp_path: Path, capfd) -> None:
    """It was three lines of output (the datasets library's message twice, rows counted from 0), the last one
    without the line number."""
    path = write_jsonl(tmp_path / "mbpp.jsonl", MBPP[:2])
    path.write_text(path.read_text() + '{"text": "broken", "code": \n')
    with pytest.raises(DatasetError) as err:
        load(path, *MBPP_FIELDS)
    assert str(err.value) == f"{path}:3: invalid JSON (Expecting value: column 28)"
    assert "Failed to load JSON" not in capfd.readouterr().err  # the library was never asked


def test_a_row_whose_tests_do_not_parse_is_one_line_naming_the_row(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "mbpp.jsonl", [MBPP[0], {**MBPP[1], "test_list": ["assert sort_matrix([[1]]) =="]}])
    with pytest.raises(DatasetError) as exc:
        load(path, *MBPP_FIELDS)
    assert str(exc.value) == f"{path}: row 2: field 'test' does not parse: line 1: invalid syntax"
