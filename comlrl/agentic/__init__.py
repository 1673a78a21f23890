"""Code agents that reason, call a Python tool, read the real result and fix their code in one trace.

`toolcall` finds and parses the `<tool_call>` blocks models write (repairing the JSON they really emit);
`doctest_tests` turns a prompt's `>>>` examples into tests for the reward.
"""

from comlrl.agentic.doctest_tests import check_function, extract_doctest_tests, extract_doctests
from comlrl.agentic.toolcall import (
    STOP_SEQUENCES,
    ToolCall,
    ToolCallError,
    ToolCallSpan,
    close_unfinished_call,
    find_tool_calls,
    format_tool_response,
    parse_tool_call,
    strip_fake_responses,
)

__all__ = [
    "STOP_SEQUENCES",
    "ToolCall",
    "ToolCallError",
    "ToolCallSpan",
    "check_function",
    "close_unfinished_call",
    "extract_doctest_tests",
    "extract_doctests",
    "find_tool_calls",
    "format_tool_response",
    "parse_tool_call",
    "strip_fake_responses",
]
