"""What the project's Atropos environments share: their config, the problems, the sandbox, and how a group is built.

A group is built from chats, not from the server's token ids: every OpenAI-compatible server returns text,
so the env tokenizes the finished chat with the trainer's tokenizer (`env.tokenizer_name`) and masks
everything but the assistant turns (`tokens_and_masks`, atroposlib's `tokenize_for_trainer`). Per-token
log-probs from the server are attached only where they line up one to one with the trained tokens
(`aligned_logprobs`); a trainer then never reads a log-prob against the wrong token.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import random
from collections.abc import Sequence
from typing import Any

from atroposlib.envs.base import BaseEnv, BaseEnvConfig
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.utils.tokenize_for_trainer import tokenize_for_trainer
from pydantic import Field

from comlrl.models import resolve_model_path
from comlrl.run.atropos_groups import MASKED, trained_spans  # the trainer's reading of the same masks
from comlrl.tasks.base import Problem
from comlrl.tasks.datasets import DatasetConfig, load_dataset

log = logging.getLogger("comlrl.integrations.atropos")
MASKED_LOGPROB = 1.0  # Atropos's placeholder log-prob at masked positions (example_trainer/data.py)


class ProblemEnvConfig(BaseEnvConfig):
    """The env's own fields (`--env.<name>`), beside Atropos's: which problems, how to sample, the sandbox."""

    dataset: str = Field(default="easy", description="easy | humaneval | jsonl (comlrl.tasks.datasets)")
    dataset_path: str | None = Field(default=None, description="dataset=jsonl: a HumanEval-format JSONL file")
    eval_size: int = Field(default=8, description="held-out problems (a seeded split by task id)")
    seed: int = Field(default=0, description="split and item order")
    max_tokens: int = Field(default=512, description="new tokens per completion (per round for the tool env)")
    temperature: float = Field(default=0.8, description="sampling temperature of training groups")
    top_p: float = Field(default=1.0, description="nucleus sampling of training groups")
    eval_temperature: float = Field(default=0.0, description="0: greedy held-out evaluation")
    eval_samples: int = Field(default=1, description="completions per held-out problem (pass rate over all)")
    request_logprobs: bool = Field(default=False, description="ask the server for per-token log-probs")
    sandbox_workers: int = Field(default=2, description="sandbox worker processes that run the tests")
    sandbox_timeout_s: float = Field(default=5.0, description="CPU seconds per sandboxed run")
    server_api: str = Field(default="openai", description="openai: Atropos's server class for --openai.server_type "
                            "(OpenAI-compatible by default); ollama: Ollama's native /api/chat (ollama_server.py)")


def pick_server_cls(config: ProblemEnvConfig, default: Any) -> Any:
    """The server class the env's server manager builds: Atropos's (`default`) or the Ollama one."""
    if config.server_api == "ollama":
        from comlrl.integrations.atropos.ollama_server import OllamaAPIServer

        return OllamaAPIServer
    if config.server_api != "openai":
        raise ValueError(f"env.server_api={config.server_api!r}; expected openai or ollama")
    return default


def offline_defaults(cls: type[ProblemEnvConfig], **fields: Any) -> tuple[ProblemEnvConfig, list[APIServerConfig]]:
    """`config_init` defaults that run here without a network: the tiny model's tokenizer (built locally,
    SmolLM2's vocabulary), no wandb, and one OpenAI-compatible server on localhost to override."""
    tokenizer = resolve_model_path("tiny-random")
    env = cls(tokenizer_name=tokenizer, use_wandb=False, group_size=4, max_token_length=4096, total_steps=100,
              steps_per_eval=20, max_num_workers_per_node=4, include_messages=True, **fields)
    server = APIServerConfig(model_name="default", base_url="http://localhost:8000/v1", api_key="x",
                             num_requests_for_eval=8, tokenizer_name=tokenizer)
    return env, [server]


def load_split(cfg: ProblemEnvConfig) -> tuple[list[Problem], list[Problem]]:
    """Train and held-out problems through the project's loader (the same split `comlrl-train` makes)."""
    dataset = DatasetConfig(name=cfg.dataset, path=cfg.dataset_path, eval_size=cfg.eval_size, seed=cfg.seed)
    dataset.check()
    return load_dataset(dataset)


class ProblemCycle:
    """Training problems in a seeded order, reshuffled each pass: every problem once per epoch."""

    def __init__(self, problems: Sequence[Problem], seed: int) -> None:
        if not problems:
            raise ValueError("no training problems")
        self.problems, self.rng, self.order, self.epoch = list(problems), random.Random(seed), [], 0

    def next(self) -> Problem:
        if not self.order:
            self.order = list(range(len(self.problems)))
            self.rng.shuffle(self.order)
            self.epoch += 1
        return self.problems[self.order.pop(0)]


class _IdTemplate:
    """The tokenizer, with `apply_chat_template` returning plain id lists: transformers 5 returns a
    `BatchEncoding` by default, which atroposlib 0.4.0's `tokenize_for_trainer` would take for the ids."""

    def __init__(self, tokenizer: Any) -> None:
        self._tok = tokenizer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def apply_chat_template(self, chat: Any, **kwargs: Any) -> Any:
        if kwargs.get("tokenize", True):
            kwargs["return_dict"] = False
        return self._tok.apply_chat_template(chat, **kwargs)


def tokens_and_masks(tokenizer: Any, chat: list[dict[str, str]], *, all_assistant_turns: bool,
                     finish_reason: str = "") -> tuple[list[int], list[int]]:
    """Token ids of the chat and its masks (-100 except on trained tokens), by atroposlib's own function.

    `all_assistant_turns`: every assistant turn trained (multi-round tool chats; system, user and tool
    messages masked); else only the last message after the prompt."""
    out = tokenize_for_trainer(_IdTemplate(tokenizer), chat, train_on_all_assistant_turns=all_assistant_turns,
                               finish_reason=finish_reason)
    return [int(t) for t in out["tokens"]], [int(m) for m in out["masks"]]


def aligned_logprobs(masks: Sequence[int], per_turn: Sequence[Sequence[float] | None]) -> list[float] | None:
    """Log-probs aligned with the tokens (1.0 at masked positions), or None unless every assistant turn's
    trained span has exactly as many log-probs as the server returned for that turn."""
    spans = trained_spans(masks)
    if not per_turn or len(spans) != len(per_turn):
        return None
    out = [MASKED_LOGPROB] * len(masks)
    for (start, end), values in zip(spans, per_turn, strict=True):
        if values is None or len(values) != end - start:
            return None
        out[start:end] = [float(v) for v in values]
    return out


_WARNED_NO_LOGPROBS: set[str] = set()


def warn_if_no_logprobs(config: ProblemEnvConfig, choices: Sequence[Any], server: str) -> bool:
    """With `request_logprobs` on, a reply whose choices carry none is said once per server (a server that
    ignores `logprobs=true`: the groups then go without, and the trainer recomputes them); True if said."""
    if not config.request_logprobs or not choices or any(choice_logprobs(c) is not None for c in choices):
        return False
    if server in _WARNED_NO_LOGPROBS:
        return False
    _WARNED_NO_LOGPROBS.add(server)
    log.warning("env.request_logprobs is true but %s returned no log-probs (no logprobs.content): the groups carry "
                "none and the trainer recomputes them; serve with a server that returns them (comlrl-serve, vLLM) "
                "or set --env.request_logprobs false", server)
    return True


def choice_logprobs(choice: Any) -> list[float] | None:
    """Per-token log-probs of an OpenAI chat choice (`logprobs.content[*].logprob`), or None."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    return [float(entry.logprob) for entry in content]


def build_group(tokenizer: Any, chats: Sequence[list[dict[str, str]]], scores: Sequence[float],
                logprobs: Sequence[Sequence[Sequence[float] | None]], *, all_assistant_turns: bool,
                finish_reasons: Sequence[str] | None = None) -> dict[str, Any]:
    """A `ScoredDataGroup`: tokens, masks, scores, messages, and `inference_logprobs` only when every
    sequence's log-probs line up with its trained tokens (`aligned_logprobs`); else that key is absent."""
    group: dict[str, Any] = {"tokens": [], "masks": [], "scores": [], "messages": []}
    aligned: list[list[float] | None] = []
    for i, (chat, score, turns) in enumerate(zip(chats, scores, logprobs, strict=True)):
        finish = finish_reasons[i] if finish_reasons else ""
        tokens, masks = tokens_and_masks(tokenizer, chat, all_assistant_turns=all_assistant_turns,
                                         finish_reason=finish or "")
        group["tokens"].append(tokens)
        group["masks"].append(masks)
        group["scores"].append(float(score))
        group["messages"].append(chat)
        aligned.append(aligned_logprobs(masks, turns))
    if aligned and all(a is not None for a in aligned):
        group["inference_logprobs"] = aligned
    return group


def exact_group(prompt_ids: Sequence[int] | None, choices: Sequence[Any], chats: Sequence[list[dict[str, str]]],
                scores: Sequence[float]) -> dict[str, Any] | None:
    """A single-turn group of exactly the tokens the server sampled: its prompt ids, each choice's `token_ids`
    (comlrl's rollout server gives them; vLLM's OpenAI server with `return_token_ids`), and each choice's
    log-probs aligned one to one with them. None when the server gave no ids: then the chat is re-tokenized
    (`build_group`), which need not reproduce the sampled tokens."""
    ids = [getattr(c, "token_ids", None) for c in choices]
    if not prompt_ids or not choices or any(not isinstance(t, list) or not t for t in ids):
        return None
    prompt = [int(t) for t in prompt_ids]
    group: dict[str, Any] = {"tokens": [], "masks": [], "scores": [float(s) for s in scores],
                             "messages": [list(c) for c in chats]}
    logprobs: list[list[float]] = []
    for choice, completion in zip(choices, ids, strict=True):
        completion = [int(t) for t in completion]
        group["tokens"].append(prompt + completion)
        group["masks"].append([MASKED] * len(prompt) + completion)
        values = choice_logprobs(choice)
        if values is not None and len(values) == len(completion):
            logprobs.append([MASKED_LOGPROB] * len(prompt) + values)
    if len(logprobs) == len(choices):
        group["inference_logprobs"] = logprobs
    return group


async def in_thread(fn: Any, *args: Any) -> Any:
    """A blocking call (sandbox runs, lock-step episodes) off the event loop, so server calls keep flowing."""
    return await asyncio.to_thread(fn, *args)


class SentStats:
    """Per-sample figures of the groups Atropos actually sends (or writes), for `wandb_log`.

    `collect_trajectories` files them under the group's identity; `add_rollouts_for_wandb`, which Atropos
    calls once per group it accepts, moves them to `sent`: groups it drops (equal scores, too long) never count.
    """

    def __init__(self) -> None:
        self.pending: dict[int, dict[str, list[float]]] = {}
        self.sent: dict[str, list[float]] = {}

    def file(self, group: Any, **values: list[float]) -> None:
        if len(self.pending) > 1024:  # groups dropped before sending: forget the oldest
            self.pending.pop(next(iter(self.pending)))
        self.pending[id(group)] = values

    def accept(self, group: Any) -> None:
        for key, vals in self.pending.pop(id(group), {}).items():
            self.sent.setdefault(key, []).extend(vals)

    def take(self) -> dict[str, float]:
        """Means since the last call, as `train/<key>`."""
        out = {f"train/{k}": mean(v) for k, v in self.sent.items() if v}
        self.sent = {}
        return out


def mean(values: Sequence[float]) -> float:
    return float(sum(values) / len(values)) if values else 0.0


class ProblemEnv(BaseEnv):
    """What the project's environments share: the server class the config picks, the problems in a seeded
    cycle, the sandbox, and the figures of the groups Atropos accepts (`wandb_log` adds them to Atropos's)."""

    def __init__(self, config: ProblemEnvConfig, server_configs: Any, slurm: bool = False,
                 testing: bool = False) -> None:
        self.server_cls = pick_server_cls(config, type(self).server_cls)  # read by BaseEnv.__init__
        super().__init__(config, server_configs, slurm, testing)
        self.stats = SentStats()  # figures of the groups Atropos accepts
        self.eval_metrics: dict[str, float] = {}

    def start_problems(self) -> None:
        """The train / held-out split (the project's), the training problems' cycle and the sandbox."""
        from sandbox.executor import Sandbox

        cfg = self.config
        self.train, self.held_out = load_split(cfg)
        self.items = ProblemCycle(self.train, cfg.seed)
        self.sandbox = Sandbox(workers=cfg.sandbox_workers, timeout_s=cfg.sandbox_timeout_s)
        atexit.register(self.sandbox.close)

    async def get_next_item(self) -> Problem:
        return self.items.next()

    async def add_rollouts_for_wandb(self, scored_data: Any, item: Any = None) -> None:
        """Atropos calls this once per group it accepts: that group's figures count."""
        self.stats.accept(scored_data)
        await super().add_rollouts_for_wandb(scored_data, item)

    async def wandb_log(self, wandb_metrics: dict | None = None) -> None:
        """The env's numbers (its accepted groups' figures since the last log, the last evaluation's), then
        Atropos's."""
        metrics = {**(wandb_metrics or {}), **self.stats.take(), **self.eval_metrics}
        self.last_logged, self.eval_metrics = metrics, {}
        await super().wandb_log(metrics)
