"""The one door to BFCL v4's own code: its data loaders, its AST checker and its multi-turn checker.

The `bfcl-eval` package is installed without its declared dependencies (`pip install --no-deps
bfcl-eval==2026.3.23`: scripts/install.sh; the declared set pins numpy 1.26.4 and pulls every model
vendor's SDK). Everything the judging needs imports from the package as shipped but one module:
`bfcl_eval.constants.model_config`, the table of the models BFCL's leaderboard runs, whose import loads
every vendor's handler and SDK. The AST checker reads one field of it, `underscore_to_dot` (whether the
judged model's API forbade dots in function names, so the checker rewrites them); our agents write the
names as given, so that field is False for them. This module puts a one-field stand-in for that table in
`sys.modules` before the checkers are imported; the checkers' code runs unchanged. What each way of
installing the checker costs (this one, the smallest set of SDKs that imports the real table, the full
declared set in its own venv) is measured in docs/results.md (issue 34).

BFCL writes result folders under `BFCL_PROJECT_ROOT` when imported: pointed at a temporary folder here,
removed when the process exits (the scoring process inherits the same folder).
"""

from __future__ import annotations

import atexit
import functools
import itertools
import os
import re
import shutil
import sys
import tempfile
import types
from dataclasses import dataclass
from typing import Any

from comlrl.errors import ConfigError

INSTALL_HINT = "pip install --no-deps bfcl-eval==2026.3.23 (scripts/install.sh installs it)"
JUDGE_NAME = "comlrl"  # the model name the checkers are given (their model table knows it through the stand-in)


@dataclass(frozen=True)
class _ModelEntry:
    """What the AST checker reads of a model's entry in BFCL's model table."""

    underscore_to_dot: bool = False


class _ModelTable(dict):
    """BFCL's model table as the checkers see it: every model writes function names as given."""

    def __missing__(self, key: str) -> _ModelEntry:
        return _ModelEntry()


@functools.cache
def bfcl() -> types.SimpleNamespace:
    """The BFCL modules the tasks use, imported once (a one-line ConfigError if the package is missing)."""
    if "BFCL_PROJECT_ROOT" not in os.environ:
        root = tempfile.mkdtemp(prefix="comlrl-bfcl-")
        os.environ["BFCL_PROJECT_ROOT"] = root
        atexit.register(shutil.rmtree, root, ignore_errors=True)
    if "bfcl_eval.constants.model_config" not in sys.modules:
        table = types.ModuleType("bfcl_eval.constants.model_config")
        table.MODEL_CONFIG_MAPPING = _ModelTable()  # type: ignore[attr-defined]
        sys.modules[table.__name__] = table
    try:
        from bfcl_eval import utils
        from bfcl_eval.constants import default_prompts, enums, executable_backend_config
        from bfcl_eval.eval_checker.ast_eval import ast_checker
        from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker, multi_turn_utils
    except ModuleNotFoundError as exc:
        raise ConfigError(f"config error: task.name=bfcl needs the BFCL v4 package ({exc.name} did not import): "
                          f"{INSTALL_HINT}") from None
    return types.SimpleNamespace(utils=utils, prompts=default_prompts, enums=enums, ast=ast_checker,
                                 multi_turn=multi_turn_checker, multi_turn_utils=multi_turn_utils,
                                 backends=executable_backend_config)


@dataclass(frozen=True)
class Verdict:
    """The checker's answer for one model output: valid, and if not, BFCL's error type and messages."""

    valid: bool
    error_type: str = ""
    errors: tuple[str, ...] = ()


def _verdict(result: dict[str, Any]) -> Verdict:
    if result["valid"]:  # the AST checker leaves a default error type on a valid result
        return Verdict(True)
    errors = result.get("error") or result.get("error_message") or ()
    errors = (errors,) if isinstance(errors, str) else tuple(str(e) for e in errors)
    return Verdict(False, str(result.get("error_type", "")), errors)


def language_of(category: str) -> Any:
    """The checker's language for a category (BFCL's own rule: simple_java, simple_javascript, else Python)."""
    lang = bfcl().enums.Language
    return (lang.JAVA if category.endswith("java")
            else lang.JAVASCRIPT if category.endswith("javascript") else lang.PYTHON)


def ast_verdict(functions: list[dict], decoded: list[dict], gold: list[dict], category: str) -> Verdict:
    """BFCL's AST checker on one decoded output (`[{name: {param: value}}]`), as its eval runner calls it:
    the output-format check first, then `ast_checker` (which never raises on model output it cannot match;
    an exception there is turned into an invalid verdict so a model cannot crash the trainer)."""
    b = bfcl()
    if not b.utils.is_function_calling_format_output(decoded):
        return Verdict(False, "ast_decoder:decoder_wrong_output_format", ("Did not output in the specified format.",))
    try:
        result = b.ast.ast_checker(functions, decoded, gold, language_of(category), category, JUDGE_NAME)
    except Exception as exc:  # noqa: BLE001 - the checker on a strange value: a failed verdict, not a crash
        return Verdict(False, "checker_exception", (f"{type(exc).__name__}: {exc}",))
    return _verdict(result)


def relevance_verdict(called: bool, category: str) -> Verdict:
    """BFCL's (ir)relevance rule: an irrelevance entry passes when no reply holds a call (its decoder failed,
    or decoded an empty output: `utils.is_empty_output`), a relevance entry when one does."""
    if "irrelevance" in category:
        return Verdict(True) if not called else Verdict(False, "irrelevance_error:decoder_success",
                                                        ("Valid syntax. Successfully decode AST when it should not.",))
    return Verdict(True) if called else Verdict(False, "relevance_error:decoder_failed", ("No call decoded.",))


_judge_runs = itertools.count()


def multi_turn_verdict(entry: dict, decoded_turns: list[list[list[str]]], gold_turns: list[list[str]]) -> Verdict:
    """BFCL's multi-turn checker on one trajectory: per user turn, the decoded steps (each a list of call
    strings) it made. It replays the model's calls and the ground truth's on fresh instances of the
    benchmark's backend classes and compares their states and execution results after every turn;
    `gold_turns` may stop early (the per-turn verdict of a trajectory that has not ended yet).

    The checker keeps its backend instances in its module's globals under the model name and entry id,
    so each verdict runs under a name of its own and its instances are dropped afterwards. The call
    strings must be canonical (comlrl/tasks/bfcl/calls.py renders them from literals only): the checker
    `eval`s them."""
    b = bfcl()
    name = f"{JUDGE_NAME}_{next(_judge_runs)}"
    category = entry["id"].rsplit("_", 1)[0]
    try:
        result = b.multi_turn.multi_turn_checker(decoded_turns, gold_turns, entry, category, name)
    except Exception as exc:  # noqa: BLE001 - a backend raising on a model's arguments is a failed verdict
        return Verdict(False, "checker_exception", (f"{type(exc).__name__}: {exc}",))
    finally:
        scope, prefix = vars(b.multi_turn_utils), re.sub(r"[-./:]", "_", name) + "_"
        for key in [k for k in scope if k.startswith(prefix)]:
            del scope[key]
    return _verdict(result)
