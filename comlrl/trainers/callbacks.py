"""The user's callables as CoMLRL 1.4.3 calls them: formatters (an item -> a prompt string per agent), the reward
function (one call per joint action) and the external transition (next-turn prompts per agent).

Each adapter reads the callable's signature once and passes what it accepts, as 1.4.3 does, so functions written
for 1.4.3 (or for earlier releases, whose transitions take no history) run unchanged. A callable that raises or
returns the wrong shape is a `CallbackError` naming it in one line: a prompt or reward that silently became ""
or 0 would train on noise.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class CallbackError(ValueError):
    """A user's formatter, reward function or transition failed or returned the wrong shape (one line)."""


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _first_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}".rstrip(": ")


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins and C callables have none: call them positionally
        return None


def _accepts(sig: inspect.Signature | None, name: str) -> bool:
    """`fn` takes keyword `name` (by name or through **kwargs)."""
    if sig is None:
        return False
    params = sig.parameters
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


@dataclass(frozen=True)
class Formatter:
    """One agent's formatter: the first turn's prompt from the item, and a later turn's from the transition's
    prompt (`passthrough`: that prompt as it is; else the formatter on the item whose `prompt` is the transition's,
    the original kept as `_original_prompt`, with `external_prompts=` where the formatter takes it)."""

    fn: Callable[..., Any] | None
    agent: int
    passthrough: bool = False

    def first(self, item: Mapping[str, Any]) -> str:
        return self._checked(self.fn(item) if self.fn is not None else item.get("prompt", ""))

    def later(self, item: Mapping[str, Any], external: str) -> str:
        if self.passthrough or self.fn is None:
            return self._checked(external)
        changed = {**item, "_original_prompt": item.get("prompt", ""), "prompt": external}
        if _accepts(_signature(self.fn), "external_prompts"):
            return self._checked(self.fn(changed, external_prompts=external))
        return self._checked(self.fn(changed))

    def _checked(self, value: Any) -> str:
        if not isinstance(value, str):
            who = f"formatters[{self.agent}] ({_name(self.fn)})" if self.fn is not None else "the external transition"
            raise CallbackError(f"{who} returned {type(value).__name__}, expected a prompt string for agent "
                                f"{self.agent}")
        return value


def formatters_for(formatters: Any, num_agents: int, passthrough: bool) -> list[Formatter]:
    """None (each item's `prompt`), one callable for every agent, or one per agent (1.4.3's three forms)."""
    if formatters is None or callable(formatters):
        return [Formatter(formatters, a, passthrough) for a in range(num_agents)]
    if isinstance(formatters, Sequence) and not isinstance(formatters, str | bytes):
        fns = list(formatters)
        if len(fns) != num_agents or not all(callable(f) for f in fns):
            raise CallbackError(f"formatters: expected {num_agents} callables (one per agent), got {len(fns)} "
                                "entries" + ("" if all(callable(f) for f in fns) else " (not all callable)"))
        return [Formatter(f, a, passthrough) for a, f in enumerate(fns)]
    raise CallbackError(f"formatters: expected None, a callable or a list of callables, got "
                        f"{type(formatters).__name__}")


def _number(value: Any) -> float | None:
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    return None


def _values(values: Any) -> Any:
    """A tensor's values as a list (1.4.3 converts them); anything else as it came."""
    if _number(values) is None and not isinstance(values, Sequence):
        import torch  # loaded already in a run

        if isinstance(values, torch.Tensor):
            return values.detach().cpu().reshape(-1).tolist()
    return values


def first_reward(values: Any, who: str) -> float:
    """The joint action's reward from what the function returned: 1.4.3 reads the first value of the list (one
    per joint action, the function being called on one joint action at a time); a bare number or a tensor works
    as there."""
    values = _values(values)
    if _number(values) is not None:
        return float(values)
    if isinstance(values, Sequence) and not isinstance(values, str | bytes) and values:
        head = _number(values[0])
        if head is not None:
            return head
        raise CallbackError(f"{who} returned {values[0]!r} as the first value; expected a finite number")
    raise CallbackError(f"{who} returned {type(values).__name__} {values!r:.80}; expected a list of numbers")


def joint_reward(values: Any, who: str, equal_ok: bool) -> float:
    """One value per joint action where 1.4.3 would read more: the actor-critics read one value per agent
    (refused here unless they are equal, `equal_ok`: this engine has one reward per joint action), a centralized
    reward exactly one."""
    values = _values(values)
    head = first_reward(values, who)
    if _number(values) is not None or len(values) == 1:
        return head
    if not equal_ok:
        raise CallbackError(f"{who} returned {len(values)} values; a centralized reward returns one joint reward")
    if any(_number(v) != head for v in values):
        raise CallbackError(f"{who} returned {len(values)} different values {list(values)!r:.80}: per-agent rewards "
                            "have no counterpart here (one reward per joint action); return one value")
    return head


class RewardCall:
    """`reward_func(*completions_per_agent, batch_items=[item], prompts=[prompt])` for one joint action, each
    agent's completions a one-element list, keywords only where the function takes them; a function whose first
    positional parameter is `prompts`, or that has one positional parameter more than the agents, gets the prompts
    first, one with a single positional parameter (several agents) the list of the agents' lists (1.4.3's forms).
    `processor` maps the value (reward_processor). `read`: how the returned list becomes the reward, as the trainer
    reads it in 1.4.3: `first` (MAGRPO), `joint` (the actor-critics: one value, or several equal ones) or `one`
    (centralized); `all_prompts`: `prompts` holds every agent's prompt (the actor-critics), not agent 0's only."""

    KEYWORDS = ("batch_items", "prompts")

    def __init__(self, fn: Callable[..., Any], num_agents: int, processor: Callable[[float], float] | None, *,
                 read: str = "first", all_prompts: bool = False) -> None:
        if not callable(fn):
            raise CallbackError(f"reward_func: expected a callable that returns a list of floats, got "
                                f"{type(fn).__name__}")
        self.fn, self.num_agents, self.processor = fn, num_agents, processor
        self.read, self.all_prompts = read, all_prompts
        self.who = f"reward_func ({_name(fn)})"
        sig = self.sig = _signature(fn)
        params = list(sig.parameters.values()) if sig is not None else []
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.varargs = sig is None or any(p.kind is p.VAR_POSITIONAL for p in params)
        self.positional = len([n for n in names if n not in self.KEYWORDS])
        self.prompts_first = not self.varargs and ((names[:1] == ["prompts"]) or self.positional == num_agents + 1)

    def _args(self, completions: list[list[str]], prompts: list[str]) -> list[Any]:
        if self.varargs:
            return list(completions)
        if self.prompts_first:
            return [prompts, *completions]
        if self.positional == 1 and self.num_agents > 1:
            return [completions]
        return list(completions)

    def _reward(self, values: Any) -> float:
        if self.read == "first":
            return first_reward(values, self.who)
        return joint_reward(values, self.who, equal_ok=self.read == "joint")

    def __call__(self, texts: Sequence[str], item: Mapping[str, Any],
                 prompt: str | Sequence[str]) -> tuple[float, float]:
        """(raw value, processed value) of one joint action; `prompt`: the agents' prompts of the turn (or agent
        0's)."""
        prompts = [prompt] if isinstance(prompt, str) else list(prompt if self.all_prompts else prompt[:1])
        args = self._args([[t] for t in texts], prompts)
        kwargs: dict[str, Any] = {}
        if _accepts(self.sig, "batch_items"):
            kwargs["batch_items"] = [dict(item)]
        if not self.prompts_first and _accepts(self.sig, "prompts"):
            kwargs["prompts"] = prompts
        try:
            raw = self._reward(self.fn(*args, **kwargs))
        except CallbackError:
            raise
        except Exception as exc:  # noqa: BLE001 - a user's function: any failure is one line naming it
            raise CallbackError(f"{self.who} raised {_first_line(exc)}") from exc
        if self.processor is None:
            return raw, raw
        try:
            processed = _number(self.processor(raw))
        except Exception as exc:  # noqa: BLE001 - the user's reward_processor
            raise CallbackError(f"reward_processor ({_name(self.processor)}) raised {_first_line(exc)}") from exc
        if processed is None:
            raise CallbackError(f"reward_processor ({_name(self.processor)}) returned a value that is not a finite "
                                "number")
        return raw, processed


class TransitionCall:
    """`external_transition(prompt=, agent_completions=, num_agents=, prompt_history_per_agent=,
    response_history_per_agent=)`, each keyword passed where the function takes it (releases before 1.4 pass only
    the first three); it must return one prompt per agent."""

    KEYWORDS = ("prompt", "agent_completions", "num_agents", "prompt_history_per_agent", "response_history_per_agent")

    def __init__(self, fn: Callable[..., Any], num_agents: int) -> None:
        if not callable(fn):
            raise CallbackError(f"external_transition: expected a callable, got {type(fn).__name__}")
        self.fn, self.num_agents = fn, num_agents
        self.who = f"external_transition ({_name(fn)})"
        sig = _signature(fn)
        self.keywords = [k for k in self.KEYWORDS if sig is None or _accepts(sig, k)]

    def __call__(self, prompt: str, completions: list[str], prompt_history: list[list[str]],
                 response_history: list[list[str]]) -> list[str]:
        values = {"prompt": prompt, "agent_completions": list(completions), "num_agents": self.num_agents,
                  "prompt_history_per_agent": prompt_history, "response_history_per_agent": response_history}
        try:
            out = self.fn(**{k: values[k] for k in self.keywords})
        except Exception as exc:  # noqa: BLE001 - a user's function: any failure is one line naming it
            raise CallbackError(f"{self.who} raised {_first_line(exc)}") from exc
        if not isinstance(out, list | tuple) or len(out) != self.num_agents:
            raise CallbackError(f"{self.who} returned {type(out).__name__}"
                                + (f" of {len(out)}" if isinstance(out, list | tuple) else "")
                                + f"; expected a list of {self.num_agents} prompts (one per agent)")
        return list(out)
