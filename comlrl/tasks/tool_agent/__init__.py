"""The tool agent (task.name=tool_agent): one coder that reasons, calls a Python tool, reads the real result
and fixes its code in one trace (docs/tool-agent.md).

    task.py           ToolAgentTask: data, prompts, `score` (one tool round per turn) and its own Transition
    call_format.py    the tags and stop sequences, ToolCall / ToolCallError, the `<tool_response>` block
    call_blocks.py    find the `<tool_call>` blocks in a completion; strip the responses the model faked
    call_parser.py    parse one call, repairing the JSON models really write (never raises)
    lenient_json.py   the backtracking JSON reader those repairs use
    doctest_tests.py  tests from the prompt's `>>>` examples
    environment.py    a problem's full test suite; sandboxed runs of the agent's code
    turns.py          one round: analyse the completion, render the tool response, score it
    prompts.py        the chat messages: system prompt, first message, later rounds
    backends.py       where trace completions come from: the local model or a `comlrl.llm` client
    episodes.py       multi-round episodes outside the trainer, per-trace metrics and records

The trace generator's command line is `comlrl.cli.generate_traces` (console script `comlrl-traces`).
"""

from comlrl.tasks.tool_agent.task import ToolAgentTask

__all__ = ["ToolAgentTask"]
