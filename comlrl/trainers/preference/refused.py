"""CoMLRL 1.4.3's preference trainers, which have no honest counterpart here: their names import (so a script's
imports work and its first use says why in one line), and constructing any of them raises one `ConfigError`
line naming the class, what differs and what to run instead (docs/comlrl-compat.md, "Refused").

This engine has preference algorithms of its own (`madpo`, `marlhf`: docs/algorithm.md), but they train other
objectives on other data than 1.4.3's, so running them under 1.4.3's names would train something else silently.
"""

from __future__ import annotations

from typing import Any, NoReturn

from comlrl.errors import ConfigError

MADPO = ("1.4.3's MADPO (a reference-free DPO, joint over the agents, on pairs drawn once before training from "
         "preference_num_candidates samples per item) has no counterpart here: this engine's madpo is DPO per agent "
         "against the base model on every tree node's siblings, each step; run that with comlrl-train "
         "algorithm.name=madpo (docs/algorithm.md)")
MARLHF = ("1.4.3's MARLHF (a separate joint reward model trained once on offline preference pairs, then frozen as "
          "the reward of an online MAGRPO/IAC/MAAC run) has no counterpart here: this engine's marlhf learns reward "
          "heads on the agents together with the policy; run that with comlrl-train algorithm.name=marlhf "
          "(docs/algorithm.md)")
ITERATIVE = ("1.4.3's iterative preference rounds (its MADPO/MARLHF objectives on candidates of a comparator policy, "
             "round by round) have no counterpart here: this engine's rounds label the policy's own siblings "
             "(algorithm.dpo.comparator, algorithm.dpo.replay; docs/algorithm.md)")


def refused(name: str, why: str, module: str) -> type:
    """A class named `name` (of 1.4.3's `module`) whose construction raises `config error: <name>: <why>`."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
        raise ConfigError(f"config error: {name}: {why}")

    return type(name, (), {"__init__": __init__, "__module__": module, "__qualname__": name,
                           "__doc__": f"Refused here (constructing it raises): {why}."})
