"""The single-agent code task (`code_single`) as an Atropos environment.

Each item is one problem of the project's data sets (the built-in easy set by default, HumanEval or a
JSONL file as options). Its group is G = `group_size` completions of ONE chat-completion request
(`n=G`) to whichever server the env was given (any OpenAI-compatible server; `--openai.*`), scored by the
`code_single` task itself: the same prompt, code extraction, reward rule (`reward`, default `levels`)
and sandboxed tests as `comlrl-train task.name=code_single`. Tokens and masks come from the finished chat
(`common.build_group`).

    python -m comlrl.integrations.atropos.code_env process --env.total_steps 2 --env.group_size 2 \
        --env.use_wandb false --env.data_path_to_save_groups groups.jsonl \
        --openai.base_url http://127.0.0.1:8000/v1 --openai.model_name my-model --openai.api_key x
    python -m comlrl.integrations.atropos.code_env serve ...      # to a running `run-api`
    python -m comlrl.integrations.atropos.code_env evaluate --env.data_dir_to_save_evals evals/ ...

Ollama's native /api/chat (with its per-token log-probs) instead of an OpenAI route: the config switch
`--env.server_api ollama` makes the server manager build `ollama_server.OllamaAPIServer` for the
`--openai.*` server (`--openai.base_url http://127.0.0.1:11434 --openai.model_name qwen2.5-coder:7b`).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from atroposlib.envs.base import ScoredDataGroup
from pydantic import Field, field_validator

from comlrl.integrations.atropos.common import (
    ProblemEnv,
    ProblemEnvConfig,
    build_group,
    choice_logprobs,
    exact_group,
    in_thread,
    mean,
    offline_defaults,
    warn_if_no_logprobs,
)
from comlrl.tasks import build_task
from comlrl.tasks.base import Problem
from comlrl.tree.contracts import JointTurn, TaskConfig


class CodeEnvConfig(ProblemEnvConfig):
    """`--env.*` of the code env: the shared problem fields plus the code task's reward rule."""

    reward: str = Field(default="levels", description="the code tasks' reward rule (task.reward)")
    reward_funcs: list[str] = Field(default_factory=list, description="TRL-style module:function rewards added "
                                    "to the code reward (as task.reward_funcs names them)")

    @field_validator("reward_funcs", mode="before")
    @classmethod
    def _from_cli(cls, value: Any) -> Any:
        """Atropos's CLI passes the flag as a string: a JSON list, or names separated by commas."""
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [v.strip() for v in text.split(",") if v.strip()]
        return value


class CodeEnv(ProblemEnv):
    """code_single: one completion per sample, scored by the project's code reward in its sandbox."""

    name = "comlrl_code"
    env_config_cls = CodeEnvConfig
    config: CodeEnvConfig

    @classmethod
    def config_init(cls) -> tuple[CodeEnvConfig, Any]:
        """Offline defaults (the tiny model's tokenizer, no wandb); `--env.*` / `--openai.*` override them."""
        return offline_defaults(cls.env_config_cls, wandb_name=cls.name)  # the name it registers under

    async def setup(self) -> None:
        """The problems (train / held-out split), the sandbox and the task that scores."""
        self.start_problems()
        # the task as comlrl-train builds it: its reward rule plus the reward functions' terms
        self.task = build_task(TaskConfig(name="code_single", reward=self.config.reward,
                                          reward_funcs=list(self.config.reward_funcs)), self.sandbox)

    def prompt(self, problem: Problem) -> list[dict[str, str]]:
        """The task's own first turn (system prompt, problem, what to write)."""
        return self.task.initial_messages(problem)[0]

    async def request(self, problem: Problem, n: int, *, temperature: float, split: str) -> Any:
        """One chat-completion request for n choices (the server manager splits a large n; a server that
        ignores n is asked n times)."""
        kwargs: dict[str, Any] = {"messages": self.prompt(problem), "n": n, "max_tokens": self.config.max_tokens,
                                  "temperature": temperature, "split": split}
        if temperature > 0:
            kwargs["top_p"] = self.config.top_p
        if self.config.request_logprobs:
            kwargs["logprobs"] = True
        return await self.server.chat_completion(**kwargs)

    async def sample(self, problem: Problem, n: int, *, temperature: float, split: str) -> list[Any]:
        """The n choices of one request."""
        return list((await self.request(problem, n, temperature=temperature, split=split)).choices)[:n]

    async def score(self, problem: Problem, texts: list[str]) -> list[Any]:
        """`CodeReward`s of the task, one per text (sandboxed, off the event loop), with the `reward_funcs`
        terms added exactly as in a training run (`Task.score_joint`)."""
        scored = await in_thread(self.task.score_joint, [JointTurn(problem, (t,)) for t in texts])
        return [reward for reward, _ in scored]

    async def collect_trajectories(self, item: Problem) -> tuple[ScoredDataGroup | None, list[Any]]:
        """G samples of the item's problem, scored and tokenized as one group."""
        completion = await self.request(item, self.config.group_size, temperature=self.config.temperature,
                                        split="train")
        choices = list(completion.choices)[: self.config.group_size]
        warn_if_no_logprobs(self.config, choices, "the model server (--openai.base_url)")
        texts = [c.message.content or "" for c in choices]
        rewards = await self.score(item, texts)
        prompt = self.prompt(item)
        chats = [[*prompt, {"role": "assistant", "content": t}] for t in texts]
        scores = [r.total for r in rewards]
        # the server's own token ids when it gives them (comlrl's rollout server; vLLM with return_token_ids):
        # the group trains exactly what was sampled, its log-probs aligned one to one; else the chat re-tokenized
        group = exact_group(getattr(completion, "prompt_token_ids", None), choices, chats, scores) or build_group(
            self.tokenizer, chats, scores, [[choice_logprobs(c)] for c in choices], all_assistant_turns=False,
            finish_reasons=[c.finish_reason or "" for c in choices])
        out = ScoredDataGroup(**group)
        self.stats.file(out, pass_rate=[float(r.all_passed) for r in rewards], mean_score=[r.total for r in rewards])
        return out, []

    async def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """Held-out pass rate: `eval_samples` completions per held-out problem at `eval_temperature` (0: greedy)."""
        start = time.time()
        n = max(1, self.config.eval_samples)
        per_problem = await asyncio.gather(*[self.sample(p, n, temperature=self.config.eval_temperature, split="eval")
                                             for p in self.held_out])
        samples, passed, totals = [], [], []
        for problem, choices in zip(self.held_out, per_problem, strict=True):
            texts = [c.message.content or "" for c in choices]
            for text, reward in zip(texts, await self.score(problem, texts), strict=True):
                passed.append(float(reward.all_passed))
                totals.append(float(reward.total))
                samples.append({"task_id": problem.task_id, "completion": text, "score": reward.total,
                                "passed": reward.all_passed, "tests": f"{reward.tests_passed}/{reward.tests_total}"})
        self.eval_metrics = {"eval/pass_rate": mean(passed), "eval/mean_score": mean(totals),
                             "eval/problems": float(len(self.held_out)), "eval/samples": float(len(passed))}
        await self.evaluate_log(self.eval_metrics, start_time=start, end_time=time.time(), samples=samples,
                                generation_parameters={"temperature": self.config.eval_temperature, "n": n,
                                                       "max_tokens": self.config.max_tokens})
        return self.eval_metrics


if __name__ == "__main__":
    CodeEnv.cli()
