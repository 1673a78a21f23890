"""CoMLRL 1.4.3's centralized adapters (`comlrl.trainers.preference.centralized`): how one policy is asked for
every agent's output in one prompt, and how its one completion is cut back into the agents' outputs. They work
here as there: `CentralizedMAGRPOTrainer` calls them (docs/comlrl-compat.md), and scripts subclass
`TaggedCentralizedComparatorAdapter` for their own domains.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["CentralizedComparatorAdapter", "CentralizedComparatorParseError", "TaggedCentralizedComparatorAdapter"]


class CentralizedComparatorParseError(ValueError):
    """A centralized completion that cannot be cut into the agents' outputs (every agent then gets "")."""


class CentralizedComparatorAdapter(Protocol):
    """What a centralized adapter provides: one prompt for every agent's output, and the cut of a completion."""

    def build_prompt(self, batch_item: Mapping[str, Any], agent_prompts: Sequence[str]) -> str:
        """The one prompt that asks for every agent's output (`agent_prompts`: each agent's own prompt)."""
        ...

    def parse_completion(self, completion: str, batch_item: Mapping[str, Any], num_agents: int) -> Sequence[str]:
        """The completion cut into `num_agents` outputs, in agent order."""
        ...


def _section(agent: int) -> str:
    return f"<agent_{agent}>\n...\n</agent_{agent}>"


@dataclass(frozen=True)
class TaggedCentralizedComparatorAdapter:
    """The domain-neutral adapter of 1.4.3: each agent's original prompt listed, its output asked for between
    `<agent_i>` and `</agent_i>`; parsing takes the first such section per agent (case and spaces in the tags
    ignored, the text stripped), "" where an agent's is missing, and raises when there is none at all."""

    def build_prompt(self, batch_item: Mapping[str, Any], agent_prompts: Sequence[str]) -> str:
        n = len(agent_prompts)
        originals = "\n\n".join(f"Agent {i} original prompt:\n{p}" for i, p in enumerate(agent_prompts))
        sections = "\n".join(_section(i) for i in range(n))
        return (f"You are a centralized coordinator producing the separate outputs of {n} agents.\n\n"
                "Each output must satisfy its corresponding original prompt. Keep the outputs separate;\n"
                "do not merge them or add commentary outside the required tags.\n\n"
                f"{originals}\n\nReturn exactly one section for each agent in this format:\n{sections}\n")

    def parse_completion(self, completion: str, batch_item: Mapping[str, Any], num_agents: int) -> Sequence[str]:
        found = [re.search(rf"<\s*agent_{i}\s*>(.*?)<\s*/\s*agent_{i}\s*>", str(completion),
                           flags=re.IGNORECASE | re.DOTALL) for i in range(num_agents)]
        if not any(found):
            raise CentralizedComparatorParseError("Centralized completion did not contain any indexed agent sections.")
        return [m.group(1).strip() if m is not None else "" for m in found]
