"""The rollout server's OpenAI-compatible endpoints (comlrl/engines/openai_front.py), through the official
`openai` SDK pointed at a real HTTP server on loopback, with the tiny model's real tokenizer.

The vLLM engine behind the server is the recorder of test_rollout_server.py (these tests are about requests,
versions and the OpenAI shapes; every completion is [the agent's weight, *prompt]); the same endpoints on the
real vLLM engine: tests/integrations/test_atropos_end_to_end.py (slow).
"""

from __future__ import annotations

import threading

import openai
import pytest
import torch
from safetensors.torch import save_file
from test_rollout_server import Recorder
from transformers import AutoTokenizer

from comlrl.engines import rollout_server
from comlrl.engines.openai_front import BadRequest, agent_of, sampling_of
from comlrl.engines.server_engine import ServerClient
from comlrl.models import resolve_model_path


@pytest.fixture(scope="module")
def tok():
    return AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))


@pytest.fixture
def served(tmp_path, tok):
    rec = Recorder(delay=0.0, steps=1)
    httpd, state, url = rollout_server.make_server(rec, "tiny", 256, "127.0.0.1", 0, push_wait_s=1.0, tokenizer=tok)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    client = ServerClient(url)

    def push(version: int, weights: dict[int, float]) -> None:
        files = {}
        for agent, w in weights.items():
            path = tmp_path / f"v{version}-a{agent}.safetensors"
            save_file({"w": torch.tensor(w)}, str(path))
            files[str(agent)] = str(path)
        client.call("/push", {"version": version, "files": files, "whole_model": False})

    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    yield sdk, push, url
    httpd.shutdown()
    httpd.server_close()
    state.close()


def test_completions_answer_under_the_newest_pushed_version_with_token_ids(served, tok):
    sdk, push, _ = served
    with pytest.raises(openai.APIStatusError) as err:  # nothing pushed: nothing to serve
        sdk.completions.create(model="agent0", prompt=[5, 6], max_tokens=4)
    assert err.value.status_code == 503 and "pushed no weights" in str(err.value)
    push(1, {0: 10.0, 1: 11.0})
    out = sdk.completions.create(model="agent1", prompt=[5, 6], max_tokens=4, n=2, temperature=0.7)
    body = out.model_dump()
    assert body["policy_version"] == 1 and body["prompt_token_ids"] == [5, 6]
    assert [c["token_ids"] for c in body["choices"]] == [[11, 5, 6]] * 2  # n=2 (the recorder: n equal copies)
    assert out.choices[0].text == tok.decode([11, 5, 6])
    push(2, {0: 20.0, 1: 21.0})
    again = sdk.completions.create(model="agent1", prompt=[5, 6], max_tokens=4).model_dump()
    assert again["policy_version"] == 2 and again["choices"][0]["token_ids"] == [21, 5, 6]
    text = sdk.completions.create(model="whatever", prompt="hello", max_tokens=4).model_dump()
    assert text["prompt_token_ids"] == tok("hello", add_special_tokens=False)["input_ids"]
    assert text["choices"][0]["token_ids"][0] == 20  # any other model name is agent 0


def test_chat_completions_use_the_chat_template_and_repeat_greedy_answers(served, tok):
    sdk, push, _ = served
    push(1, {0: 10.0})
    msgs = [{"role": "user", "content": "Write add(a, b)."}]
    out = sdk.chat.completions.create(model="agent0", messages=msgs, max_tokens=4, n=3, temperature=0)
    body = out.model_dump()
    ids = tok(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False),
              add_special_tokens=False)["input_ids"]
    assert body["prompt_token_ids"] == ids
    assert len(out.choices) == 3 and len({c.message.content for c in out.choices}) == 1
    assert out.choices[0].message.role == "assistant" and body["usage"]["prompt_tokens"] == len(ids)


def test_models_lists_the_pushed_agents(served):
    sdk, push, _ = served
    push(1, {0: 1.0, 1: 2.0})
    assert [m.id for m in sdk.models.list().data] == ["agent0", "agent1"]
    with pytest.raises(openai.BadRequestError, match="agent0..agent1"):
        sdk.completions.create(model="agent2", prompt=[1], max_tokens=2)


def test_bad_requests_are_400_naming_the_field(served):
    sdk, push, _ = served
    push(1, {0: 1.0})
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        sdk.completions.create(model="agent0", prompt=[1], max_tokens=0)
    with pytest.raises(openai.BadRequestError, match="prompt"):
        sdk.completions.create(model="agent0", prompt=[[1], [2]], max_tokens=2)


def test_sampling_fields_map_onto_the_engine():
    s = sampling_of({"n": 4, "max_tokens": 50, "temperature": 0.5, "stop": "```", "seed": 3}, (2,), 40, 10)
    assert (s.n, s.max_tokens, s.temperature, s.stop, s.stop_token_ids, s.greedy, s.seed) == \
        (4, 30, 0.5, ("```",), (2,), False, 3)  # max_tokens cut to the room the server holds
    assert sampling_of({"temperature": 0}, (2,), 40, 10).greedy
    assert len({sampling_of({}, (2,), 40, 10).seed for _ in range(5)}) > 1  # no seed: a fresh one per request
    with pytest.raises(BadRequest, match="holds 40"):
        sampling_of({}, (2,), 40, 40)
    assert agent_of("agent3", 4) == 3 and agent_of("default", 1) == 0
