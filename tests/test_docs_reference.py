"""docs/reference/config.md is what scripts/gen_docs_reference.py writes from the schema, and it lists every key.

The generator runs in a fresh process: other tests register plugin tasks (their options become config keys) in
the process they share with this file, and the page documents the built-in schema only.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gen_docs_reference.py"

# in a fresh process: whether the page is what render() writes, and every key of the schema
PROBE = f"""
import importlib.util, json
spec = importlib.util.spec_from_file_location("gen_docs_reference", {str(SCRIPT)!r})
gen = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gen)
stats = {{}}
text = gen.render(stats)
from comlrl.config.schema import schema_keys
print(json.dumps({{"current": gen.CONFIG_MD.read_text(encoding="utf-8") == text, "stats": stats,
                  "keys": [key for key, _ in schema_keys()], "text": text}}))
"""


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_config_reference_is_current(probe: dict[str, Any]) -> None:
    assert probe["current"], "docs/reference/config.md is stale: run `python scripts/gen_docs_reference.py`"


def test_every_schema_key_has_its_row(probe: dict[str, Any]) -> None:
    page = (ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8")
    rows = [line.split("|")[1].strip().strip("`") for line in page.splitlines() if line.startswith("| `")]
    assert sorted(rows) == sorted(probe["keys"]) and len(set(rows)) == len(rows)  # each key, once
    assert probe["stats"]["keys"] == len(probe["keys"])
    assert "python scripts/gen_docs_reference.py" in page.split("## ")[0]  # the page says how it is made


def test_check_names_the_stale_file_and_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    gen = _generator()
    stale = tmp_path / "config.md"
    stale.write_text("# an old page\n", encoding="utf-8")
    monkeypatch.setattr(gen, "CONFIG_MD", stale)
    monkeypatch.setattr(gen, "render", lambda stats=None: "# the new page\n")
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(stale) in err[0]
    stale.write_text("# the new page\n", encoding="utf-8")
    assert gen.main(["--check"]) == 0


@dataclass
class _Documented:
    """A section for the comment reader."""

    # written above, at the field's indent
    # on two lines
    above: int = 1
    beside: str = "x"  # written beside
    continued: float = 0.5  # a comment that goes on
                            # on the next line | with a pipe
    bare: bool = True
    made: list[str] = field(default_factory=list)  # noqa: B006


def test_help_is_the_comment_beside_the_field() -> None:
    gen = _generator()
    assert gen.field_help(_Documented, "above") == "written above, at the field's indent on two lines"
    assert gen.field_help(_Documented, "beside") == "written beside"
    assert gen.field_help(_Documented, "continued") == "a comment that goes on on the next line | with a pipe"
    assert gen.field_help(_Documented, "bare") == ""  # no comment: an empty help cell
    assert gen.field_help(_Documented, "made") == ""  # a linter's comment is no help
    assert gen.class_doc(_Documented) == "A section for the comment reader."


def test_cells_keep_a_table_whole() -> None:
    gen = _generator()
    assert gen._code("int") == "`int`"
    assert gen._code("int | None") == "<code>int &#124; None</code>"  # a pipe in a code span splits GitHub's cell
    assert gen._prose("a | b, `x | y` <m>") == "a \\| b, <code>x &#124; y</code> &lt;m&gt;"
    assert gen._default_text(None) == "null" and gen._default_text("mean") == "mean"
    assert gen._default_text(["q", "k"]) == "[q, k]" and gen._default_text(False) == "false"
