"""The agents' prompts on BFCL: the benchmark's own system prompt for prompting models (its default
format: Python-call replies, function documents as JSON, plain text, classic style), built from the
templates `bfcl_eval.constants.default_prompts` ships, then the question's messages.

Additions for small models and teams (all optional, docs/bfcl.md): the function documents as compact
one-line signatures in the reply's own syntax instead of JSON (a 135M model copies the JSON document's
syntax into its reply), worked examples (solved training entries of the same category, as user/assistant
exchanges before the question), and, for a team, each agent's share of the calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from comlrl.tasks.bfcl.checker import bfcl

DOC_STYLES = ("json", "compact", "brief")
BRIEF_CHARS = 100  # `brief`: a description's first sentence, at most this long


def compact_doc(function: dict, brief: bool = False) -> str:
    """One line per function in the call syntax the reply uses: `name(a=<integer>, b=<string, optional>)  #
    description` (a 135M model copies a JSON document's syntax into its reply; it copies this one's).
    `brief`: the description's first sentence only (BFCL's multi-turn documents run to 7k tokens)."""
    params = function.get("parameters", {})
    required = set(params.get("required", []))
    args = ", ".join(f"{k}=<{v.get('type', 'any')}{'' if k in required else ', optional'}>"
                     for k, v in params.get("properties", {}).items())
    text = function.get("description", "")
    if brief:
        text = text.split(". ")[0].strip()[:BRIEF_CHARS]
    return f"{function['name']}({args})  # {text}"


def function_docs(functions: Sequence[dict], style: str) -> str:
    """The function documents as the prompt shows them: BFCL's own JSON (its default), or compact lines."""
    if style in ("compact", "brief"):
        return "\n".join(compact_doc(f, brief=style == "brief") for f in functions)
    return json.dumps(list(functions), indent=4)


def system_prompt(functions: Sequence[dict], docs: str = "json") -> str:
    """BFCL's default system prompt for prompting (non function-calling) models, for these functions
    (`docs`: their documents as BFCL's JSON, or compact lines)."""
    p = bfcl().prompts
    style = p.PROMPT_STYLE_TEMPLATES["classic"]
    return p.PROMPT_TEMPLATE_MAPPING["plaintext"].format(
        persona=style["persona"], task=style["task"],
        tool_call_format=style["tool_call_no_tag"].format(output_format=p.OUTPUT_FORMAT_MAPPING["python"],
                                                          param_types=p.PARAM_TYPE_MAPPING["python"]),
        multiturn_behavior=style["multiturn_behavior"],
        available_tools=style["available_tools"].format(format="json" if docs == "json" else "compact",
                                                        functions=function_docs(functions, docs)),
    )


def share_instruction(agent: int, num_agents: int) -> str:
    """What agent `agent` of a team writes: its share of the calls (the team's calls are run together)."""
    if num_agents == 1:
        return ""
    return (f"You are caller {agent + 1} of a team of {num_agents}: the calls of all callers are run together. "
            f"If the request needs several calls, write only calls number {agent + 1}, {agent + 1 + num_agents}, "
            f"... of the full list (your teammates write the others); if it needs one call, write it.")


def worked_example(functions: Sequence[dict], question: str, answer: str, docs: str) -> list[dict[str, str]]:
    """A solved entry as one exchange: its functions and question, then its gold calls as the reply."""
    return [{"role": "user", "content": f"Example functions:\n{function_docs(functions, docs)}\n"
                                        f"Example question: {question}"},
            {"role": "assistant", "content": answer}]


def first_turn(functions: Sequence[dict], question: Sequence[dict[str, str]], *, docs: str = "json",
               examples: Sequence[list[dict[str, str]]] = (), agent: int = 0, num_agents: int = 1
               ) -> list[dict[str, str]]:
    """One agent's turn-1 chat: the system prompt (a question's own system message appended, as BFCL does),
    the worked examples, the question."""
    system = system_prompt(functions, docs)
    share = share_instruction(agent, num_agents)
    if share:
        system = f"{system}\n{share}"
    chat = [dict(m) for m in question]
    if chat and chat[0]["role"] == "system":
        system = f"{system}\n\n{chat.pop(0)['content']}"
    return [{"role": "system", "content": system}, *(m for ex in examples for m in ex), *chat]
