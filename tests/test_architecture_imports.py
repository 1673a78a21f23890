"""Arrows one way (issue 25): every import between the project's modules is one the import contracts see.

No module finds another by a name in a string, except user modules named in the config (`plugins`,
`task.reward_funcs`); the registries import their owners' tables like any module. The contracts
themselves (`.importlinter`) hold, checked by `lint-imports` (also run by .ci/run before the tests).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# (running code with exec is not importing: the actions harness and the coop problems' checks exec code they hold)
BY_NAME = re.compile(r"\bimport_module\(|\b__import__\(|\bimportlib\.util\.spec_from")
# where a module is imported by a name only known at run time: the user's own modules
ALLOWED = {"comlrl/config/registry.py": "import_plugins: the config's `plugins`",
           "comlrl/tasks/reward_funcs.py": "resolve: task.reward_funcs' module:function",
           "sandbox/_worker.py": "the child process's own standard-library imports",
           "comlrl/tasks/verifiers/worker.py": "task.verifiers.env's module:name, in verifiers' own interpreter, where "
                                               "comlrl (and its resolver) cannot be imported"}


def test_only_user_modules_are_imported_by_name() -> None:
    found = {str(p.relative_to(ROOT)) for pkg in ("comlrl", "feedback", "sandbox") for p in (ROOT / pkg).rglob("*.py")
             if BY_NAME.search(p.read_text())}
    assert found <= set(ALLOWED), f"modules importing by a name in a string: {sorted(found - set(ALLOWED))}"


def test_the_registry_and_the_loader_name_their_imports() -> None:
    registry = (ROOT / "comlrl" / "config" / "registry.py").read_text()
    assert "import_module(module)" in registry and "_attr(" not in registry
    assert "from comlrl.config.schema" not in registry and "import comlrl.config.schema" not in registry
    # one model loader: the LLM stack's local model loads through comlrl.models (a lower layer), never its own
    local_model = (ROOT / "comlrl" / "llm" / "local_model.py").read_text()
    assert "from comlrl.models import" in local_model and "AutoModelForCausalLM" not in local_model
    assert "from comlrl.config.schema" not in (ROOT / "comlrl" / "models.py").read_text()


def test_the_import_contracts_hold() -> None:
    exe = Path(sys.executable).parent / "lint-imports"
    if not exe.exists() and shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed here")
    res = subprocess.run([str(exe) if exe.exists() else "lint-imports"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stdout[-3000:]
    assert "0 broken" in res.stdout
