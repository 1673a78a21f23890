"""What the policies hand out: a `Sample` per completion, and the names every part of the policy shares. They
live in `comlrl.tree.sample` (the tree's layer, so the tree and the learner name them too); re-exported here."""

from __future__ import annotations

from comlrl.tree.sample import Messages, Sample, agent_name, answer_prefix_of

__all__ = ["Messages", "Sample", "agent_name", "answer_prefix_of"]
