"""Code agents that reason, call a Python tool, read the real result and fix their code in one trace.

`toolcall` finds and parses the `<tool_call>` blocks models write (repairing the JSON they really emit);
`doctest_tests` turns a prompt's `>>>` examples into tests for the reward; `env` builds a problem's full
test suite and runs the agent's code in the sandbox; `turns` analyses, answers and scores one tool round;
`prompts` holds the chat messages; `backends` generates with the local model or an OpenAI-compatible
server; `episode` runs multi-round episodes and `traces` is the trace-generator CLI (docs/tool-agent.md).
Those modules import `comlrl.tasks`, so they are imported by name, not re-exported here.
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
