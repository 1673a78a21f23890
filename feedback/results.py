"""What the built-in feedback modes read of a reward: `CodeResults`, the code tasks' results of one joint action.

`comlrl.tasks.code.reward.CodeReward` satisfies it structurally. It is declared here, in terms of the
sandbox's own result records, because feedback sits below the tasks and may not import them. Members are
read-only properties so that frozen dataclasses satisfy them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from sandbox.results import ExecResult, SyntaxErrorInfo


@runtime_checkable
class AgentAnalysis(Protocol):
    """Static facts about one agent's code (`CodeAnalysis`)."""

    @property
    def role(self) -> str: ...  # the role name the analysis belongs to

    @property
    def defined(self) -> bool: ...  # the function this role must provide is a top-level def

    @property
    def syntax_error(self) -> SyntaxErrorInfo | None: ...

    @property
    def functions(self) -> tuple[str, ...]: ...  # the top-level functions the code does define


@runtime_checkable
class CodeResults(Protocol):
    """The levels of a code reward and the one sandbox execution that scored it."""

    @property
    def analyses(self) -> Sequence[AgentAnalysis]: ...  # one per agent

    @property
    def tests_passed(self) -> int: ...

    @property
    def tests_total(self) -> int: ...

    @property
    def helper_called(self) -> bool: ...  # the main agent calls the helper (teams of two or more)

    @property
    def helper_result_used(self) -> bool: ...

    @property
    def thin_wrapper(self) -> bool: ...  # the main agent only forwards to the helper

    @property
    def exec(self) -> ExecResult | None: ...  # None: the static checks failed, so nothing ran

    @property
    def notes(self) -> Sequence[str]: ...
