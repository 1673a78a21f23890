"""Isolated, fast execution of model-written code, its results, and AST test parsing/slicing.

Imports nothing from the rest of the project (see docs/architecture.md); the code tasks' reward is in
comlrl/tasks/code/reward.py.
"""

from .executor import Sandbox, SandboxUnavailable, detect_isolation
from .results import AssertResult, ExecResult, SyntaxErrorInfo
from .testparse import ParsedTests, parse_tests, slice_asserts

__all__ = [
    "AssertResult", "ExecResult", "ParsedTests", "Sandbox", "SandboxUnavailable", "SyntaxErrorInfo",
    "detect_isolation", "parse_tests", "slice_asserts",
]
