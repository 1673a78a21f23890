"""The project's tool agent as an Atropos environment: `<think>`, `<tool_call>`, real `<tool_response>`s.

Each item is one problem; its group is G = `group_size` multi-round episodes of it, run by the project's
own episode loop (`comlrl.tasks.tool_agent.episodes.run_episodes`: the same prompts, call parsing,
sandboxed runs against the whole test suite, tool responses and per-round rewards as the trace
generator and `task.name=tool_agent`). The G episodes advance in lock step: every round sends one request
per open episode (n=1 each, concurrently) to the env's server, with the tool agent's stop sequences.

A trajectory is the whole chat: system, problem, then per round the assistant's (cleaned) text and the
tool's response as a user message. Every assistant turn is trained; system, problem and tool responses
are masked (-100). Its score is the tool agent's reward for a whole trace:

    score = tests passed fraction of the final code (the final answer's, else the last code run)
            + mean over rounds of the structure terms (format + reasoning + fake_response)

so the range is a round's, [-fake_response_penalty, 1 + 1.5 x format_weight] ([-0.1, 1.15] by default).

    python -m comlrl.integrations.atropos.tool_env process --env.total_steps 2 --env.group_size 2 \
        --env.use_wandb false --env.data_path_to_save_groups groups.jsonl \
        --openai.base_url http://127.0.0.1:8000/v1 --openai.model_name my-model --openai.api_key x

`--env.server_api ollama` runs it on Ollama's native /api/chat (ollama_server.OllamaAPIServer).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from atroposlib.envs.base import ScoredDataGroup
from pydantic import Field

from comlrl.integrations.atropos.common import (
    ProblemEnv,
    ProblemEnvConfig,
    build_group,
    choice_logprobs,
    in_thread,
    mean,
    offline_defaults,
    warn_if_no_logprobs,
)
from comlrl.llm import ChatResult, Messages
from comlrl.tasks.base import Problem
from comlrl.tasks.datasets import easy_path
from comlrl.tasks.tool_agent.backends import ChatBackend, first_stop
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES
from comlrl.tasks.tool_agent.environment import ToolEnvironment, record_edge_tests
from comlrl.tasks.tool_agent.episodes import Episode, EpisodeSettings, run_episodes

STRUCTURE_TERMS = ("format", "reasoning", "fake_response")


class ToolEnvConfig(ProblemEnvConfig):
    """`--env.*` of the tool env: the shared problem fields plus the tool agent's (task.tool_agent.*)."""

    max_rounds: int = Field(default=4, description="rounds per episode (a final answer ends it earlier)")
    doctests: bool = Field(default=True, description="add the prompt's >>> examples to the tests")
    format_weight: float = Field(default=0.1, description="well-formed call (half if repaired); half for reasoning")
    fake_response_penalty: float = Field(default=0.1, description="a <tool_response> the model wrote itself")
    max_output_chars: int = Field(default=600, description="stdout / error shown in a tool response")
    show_failed: int = Field(default=1, description="failing tests shown in a tool response")
    hints: bool = Field(default=True, description="a short continuation hint after each tool response")


def trace_score(episode: Episode) -> float:
    """Tests fraction of the final code plus the mean structure terms of the rounds (module docstring)."""
    m = episode.metrics()
    tests = m["tests_passed"] / m["tests_total"] if m["tests_total"] else 0.0
    structure = mean([sum(r.reward.components.get(k, 0.0) for k in STRUCTURE_TERMS) for r in episode.rounds])
    return round(tests + structure, 10)


def episode_logprobs(episode: Episode) -> list[Sequence[float] | None]:
    """The server's log-probs per assistant turn (what `aligned_logprobs` checks against the trained spans)."""
    return [r.completion.logprobs for r in episode.rounds]


class AtroposBackend(ChatBackend):
    """The episode loop's backend on the env's server manager: called from a worker thread, it runs the
    round's requests (n=1 each, concurrently) on the env's event loop and waits for them."""

    name = "atropos"

    def __init__(self, env: ToolAgentEnv, loop: asyncio.AbstractEventLoop, *, temperature: float, split: str) -> None:
        self.env, self.loop, self.temperature, self.split = env, loop, temperature, split

    async def _one(self, messages: Messages, stop: Sequence[str]) -> ChatResult:
        cfg = self.env.config
        kwargs: dict[str, Any] = {"messages": messages, "n": 1, "max_tokens": cfg.max_tokens, "stop": list(stop),
                                  "temperature": self.temperature, "split": self.split}
        if self.temperature > 0:
            kwargs["top_p"] = cfg.top_p
        if cfg.request_logprobs:
            kwargs["logprobs"] = True
        completion = await self.env.server.chat_completion(**kwargs)
        choice = completion.choices[0]
        warn_if_no_logprobs(cfg, [choice], "the model server (--openai.base_url)")
        text = choice.message.content or ""
        logprobs = choice_logprobs(choice)
        tokens = tuple(e.token for e in choice.logprobs.content) if logprobs is not None else None
        stopped = getattr(choice, "stop_reason", None)
        usage = completion.usage
        return ChatResult(text, choice.finish_reason, stopped if isinstance(stopped, str) else first_stop(text, stop),
                          tokens, tuple(logprobs) if logprobs is not None else None,
                          int(usage.prompt_tokens) if usage else 0, int(usage.completion_tokens) if usage else 0)

    async def _all(self, conversations: Sequence[Messages], stop: Sequence[str]) -> list[ChatResult]:
        return list(await asyncio.gather(*[self._one(list(m), stop) for m in conversations]))

    def complete(self, conversations: Sequence[Messages], *, stop: Sequence[str] = ()) -> list[ChatResult]:
        return asyncio.run_coroutine_threadsafe(self._all(conversations, stop), self.loop).result()


class ToolAgentEnv(ProblemEnv):
    """The tool agent: G multi-round episodes per problem, every assistant turn trained."""

    name = "comlrl_tool_agent"
    env_config_cls = ToolEnvConfig
    config: ToolEnvConfig

    @classmethod
    def config_init(cls) -> tuple[ToolEnvConfig, Any]:
        """Offline defaults (the tiny model's tokenizer, no wandb); 384 new tokens per round."""
        return offline_defaults(cls.env_config_cls, max_tokens=384, wandb_name=cls.name)

    async def setup(self) -> None:
        """Problems, the sandbox, and the tool environment with the data set's edge tests (as the task loads them)."""
        cfg = self.config
        self.start_problems()
        self.tool_env = ToolEnvironment(self.sandbox, doctests=cfg.doctests)
        path = easy_path() if cfg.dataset == "easy" else cfg.dataset_path
        if cfg.dataset in ("easy", "jsonl") and path:
            self.tool_env.add_edge_tests(record_edge_tests(path))
        self.settings = EpisodeSettings(cfg.format_weight, cfg.fake_response_penalty, cfg.max_output_chars,
                                        cfg.show_failed, cfg.hints)

    async def episodes(self, problems: Sequence[Problem], *, temperature: float, split: str) -> list[Episode]:
        """One episode per problem, by the project's loop, in a worker thread (it blocks on the sandbox)."""
        backend = AtroposBackend(self, asyncio.get_running_loop(), temperature=temperature, split=split)
        return await in_thread(lambda: run_episodes(backend, list(problems), self.tool_env,
                                                    max_rounds=self.config.max_rounds, settings=self.settings,
                                                    stop=STOP_SEQUENCES))

    def group(self, episodes: Sequence[Episode]) -> dict[str, Any]:
        """Tokens, masks (assistant turns only), trace scores, chats and aligned log-probs of episodes."""
        finish = ["length" if e.rounds and e.rounds[-1].completion.finish_reason == "length" else "" for e in episodes]
        return build_group(self.tokenizer, [e.messages() for e in episodes], [trace_score(e) for e in episodes],
                           [episode_logprobs(e) for e in episodes], all_assistant_turns=True, finish_reasons=finish)

    async def collect_trajectories(self, item: Problem) -> tuple[ScoredDataGroup | None, list[Any]]:
        episodes = await self.episodes([item] * self.config.group_size, temperature=self.config.temperature,
                                       split="train")
        out = ScoredDataGroup(**self.group(episodes))
        metrics = [e.metrics() for e in episodes]
        self.stats.file(out, pass_rate=[float(m["success"]) for m in metrics],
                        mean_score=list(out["scores"]), rounds=[float(m["rounds"]) for m in metrics],
                        tool_calls=[float(m["tool_calls"]) for m in metrics],
                        well_formed=[float(m["well_formed"]) for m in metrics])
        return out, []

    async def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """Held-out success rate (the final code passes every test), `eval_samples` episodes per problem."""
        start = time.time()
        n = max(1, self.config.eval_samples)
        problems = [p for p in self.held_out for _ in range(n)]
        episodes = await self.episodes(problems, temperature=self.config.eval_temperature, split="eval")
        metrics = [e.metrics() for e in episodes]
        self.eval_metrics = {"eval/pass_rate": mean([float(m["success"]) for m in metrics]),
                             "eval/mean_score": mean([trace_score(e) for e in episodes]),
                             "eval/mean_rounds": mean([float(m["rounds"]) for m in metrics]),
                             "eval/problems": float(len(self.held_out)), "eval/samples": float(len(episodes))}
        samples = [{**e.record(backend="atropos", fmt="training"), "score": trace_score(e)} for e in episodes]
        await self.evaluate_log(self.eval_metrics, start_time=start, end_time=time.time(), samples=samples,
                                generation_parameters={"temperature": self.config.eval_temperature, "n": n,
                                                       "max_tokens": self.config.max_tokens,
                                                       "max_rounds": self.config.max_rounds})
        return self.eval_metrics


if __name__ == "__main__":
    ToolAgentEnv.cli()
