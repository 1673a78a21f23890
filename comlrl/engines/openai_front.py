"""OpenAI-compatible endpoints on the rollout server: other programs sample the run's current policy.

Atropos environments (docs/atropos.md), or any OpenAI client, call the rollout server the trainer pushes its
weights to:

* `GET /v1/models`: one model per agent, `agent0`, `agent1`, ... (another name means `agent0`).
* `POST /v1/completions`: `prompt` a string or a list of token ids; `n`, `max_tokens`, `temperature`
  (0: greedy), `top_p`, `stop`, `seed`, `logprobs` (any value: the sampled token's log-prob per token).
* `POST /v1/chat/completions`: `messages` through the model's chat template; the same sampling fields and
  `logprobs: true`.

Every answer is sampled under the newest policy version the server holds, named in the answer
(`policy_version`), with the token ids beside the text (`prompt_token_ids`; `token_ids` per choice, as
vLLM's `return_token_ids` gives them), so an environment can send the exact tokens it was given. Before the
trainer's first push there are no weights to serve: 503, saying so.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import asdict
from typing import Any

from comlrl.engines.refused import Refused
from comlrl.engines.vllm_runner import Sampling


class BadRequest(ValueError):
    """A request this front cannot serve (HTTP 400); the message names the field."""


class NotReady(RuntimeError):
    """Nothing to serve yet (HTTP 503): the trainer has pushed no weights."""


def agent_of(model: Any, agents: int) -> int:
    """The agent a request's `model` names: `agentK` (K below `agents`); any other name is agent 0."""
    if isinstance(model, str) and model.startswith("agent") and model[5:].isdigit():
        k = int(model[5:])
        if k >= agents:
            raise BadRequest(f"model {model!r}: this run has {agents} agent(s), agent0..agent{agents - 1}")
        return k
    return 0


def sampling_of(body: dict[str, Any], eos: tuple[int, ...], max_model_len: int, prompt_len: int) -> Sampling:
    """The request's sampling fields as the engine's `Sampling` (OpenAI's defaults: 16 tokens, temperature 1)."""
    n = body.get("n", 1)
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 16))
    temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else tuple(stop)
    if not isinstance(n, int) or n < 1:
        raise BadRequest(f"n={n!r}: an integer >= 1")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise BadRequest(f"max_tokens={max_tokens!r}: an integer >= 1")
    room = max_model_len - prompt_len
    if room < 1:
        raise BadRequest(f"the prompt has {prompt_len} tokens; the server holds {max_model_len} per sequence")
    if temperature < 0 or not all(isinstance(s, str) for s in stop):
        raise BadRequest(f"temperature={temperature!r} (>= 0) or stop={stop!r} (strings)")
    greedy = temperature == 0.0
    return Sampling(max_tokens=min(max_tokens, room), stop=stop, stop_token_ids=eos, greedy=greedy,
                    n=1 if greedy else n, temperature=temperature if not greedy else 1.0,
                    top_p=float(body.get("top_p") or 1.0),
                    # no seed given: a fresh one, so that repeated requests (n=1 each) differ
                    seed=random.getrandbits(31) if body.get("seed") is None else int(body["seed"]))


class OpenAIFront:
    """Turns OpenAI requests into the rollout server's generate requests at its held version."""

    def __init__(self, server: Any, tokenizer: Any) -> None:
        self.server, self.tok = server, tokenizer
        eos = tokenizer.eos_token_id
        self.eos = tuple(eos) if isinstance(eos, list) else (int(eos),)

    @property
    def agents(self) -> int:
        """The agents whose weights the trainer pushed (1 before the first push)."""
        return max(1, len(self.server.files))

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [{"id": f"agent{k}", "object": "model", "owned_by": "comlrl",
                                            "policy_version": self.server.version} for k in range(self.agents)]}

    def completions(self, body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]  # a batch of one
        if isinstance(prompt, str):
            ids = self.tok(prompt, add_special_tokens=False)["input_ids"]
        elif isinstance(prompt, list) and prompt and all(isinstance(x, int) for x in prompt):
            ids = list(prompt)
        else:
            raise BadRequest("prompt: a string or a list of token ids (one prompt per request)")
        version, outs = self._generate(body, ids)
        choices = []
        for i, (tokens, lps) in enumerate(outs):
            text, finish = self._text(tokens, body)
            lp = None
            if body.get("logprobs") is not None and lps is not None:
                lp = {"tokens": [self.tok.decode([t]) for t in tokens], "token_logprobs": lps,
                      "top_logprobs": None, "text_offset": None}
            choices.append({"index": i, "text": text, "finish_reason": finish, "logprobs": lp, "token_ids": tokens})
        return self._answer("text_completion", body, version, ids, outs, choices)

    def chat_completions(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m for m in messages):
            raise BadRequest("messages: a list of {role, content} objects")
        text = self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = self.tok(text, add_special_tokens=False)["input_ids"]  # the template writes the special tokens
        version, outs = self._generate(body, ids)
        choices = []
        for i, (tokens, lps) in enumerate(outs):
            text, finish = self._text(tokens, body)
            lp = None
            if body.get("logprobs") and lps is not None:
                lp = {"content": [{"token": self.tok.decode([t]), "logprob": x, "bytes": None, "top_logprobs": []}
                                  for t, x in zip(tokens, lps, strict=True)]}
            choices.append({"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                            "logprobs": lp, "token_ids": tokens})
        return self._answer("chat.completion", body, version, ids, outs, choices)

    # ---- helpers ---------------------------------------------------------------------------------
    def _generate(self, body: dict[str, Any], ids: list[int]) -> tuple[int, list[tuple[list[int], Any]]]:
        """Sample under the newest version held; a push between reading it and serving: ask again."""
        agent = agent_of(body.get("model"), self.agents)
        sampling = sampling_of(body, self.eos, self.server.max_model_len, len(ids))
        n = int(body.get("n", 1))
        for _ in range(3):
            version = self.server.version
            if version is None:
                raise NotReady("no policy to serve yet: the trainer has pushed no weights to this server")
            try:
                answer = self.server.submit("generate", {"version": version, "agent": agent, "prompts": [ids],
                                                         "sampling": [asdict(sampling)]})
            except Refused as exc:  # stale by a push in between: ask again at the new version; else refused
                if "stale" in str(exc):
                    continue
                raise
            outs = [(list(t), None if lp is None else list(lp)) for t, lp in answer["outputs"][0]]
            return int(answer["version"]), outs[:1] * n if sampling.greedy else outs  # greedy: n equal answers
        raise NotReady("the policy changed under three requests in a row: ask again")

    def _text(self, tokens: list[int], body: dict[str, Any]) -> tuple[str, str]:
        """The completion's text without EOS or the stop string that ended it, and OpenAI's finish reason."""
        ended = bool(tokens) and tokens[-1] in self.eos
        text = self.tok.decode(tokens[:-1] if ended else tokens, skip_special_tokens=False)
        stop = body.get("stop") or ()
        for s in (stop,) if isinstance(stop, str) else stop:
            if text.endswith(s):
                return text[: len(text) - len(s)], "stop"
        return text, "stop" if ended else "length"

    def _answer(self, kind: str, body: dict[str, Any], version: int, ids: list[int], outs: list, choices: list
                ) -> dict[str, Any]:
        completion = sum(len(t) for t, _ in outs)
        return {"id": f"cmpl-{uuid.uuid4().hex[:16]}", "object": kind, "created": int(time.time()),
                "model": str(body.get("model") or "agent0"), "choices": choices, "policy_version": version,
                "prompt_token_ids": ids,
                "usage": {"prompt_tokens": len(ids), "completion_tokens": completion,
                          "total_tokens": len(ids) + completion}}
