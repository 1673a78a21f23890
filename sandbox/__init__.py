"""Isolated, fast execution of model-written code, AST test parsing/slicing and code rewards.

Imports nothing from the rest of the project (see docs/architecture.md).
"""

from .executor import Sandbox, SandboxUnavailable, detect_isolation
from .results import AssertResult, ExecResult, SyntaxErrorInfo
from .testparse import ParsedTests, parse_tests, slice_asserts

__all__ = [
    "AssertResult", "ExecResult", "ParsedTests", "Sandbox", "SandboxUnavailable", "SyntaxErrorInfo",
    "detect_isolation", "parse_tests", "slice_asserts",
]
