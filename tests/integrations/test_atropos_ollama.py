"""`OllamaAPIServer`: Atropos's server interface on Ollama's native /api/chat, against a real HTTP server on
127.0.0.1 that speaks it as Ollama documents (tests/llm_server.py `OllamaServer`: NDJSON or one object,
`logprobs` entries, 404 for a model not pulled). The code env runs on it with `--env.server_api ollama`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from atropos_servers import correct_code
from atroposlib.envs.server_handling.server_baseline import APIServerConfig
from atroposlib.envs.server_handling.server_manager import ServerManager
from llm_server import OllamaServer

from comlrl.integrations.atropos.ollama_server import OllamaAPIServer, ollama_root
from comlrl.models import resolve_model_path

ASK = [{"role": "user", "content": "Say hello."}]
TEXT = "Hello there, I am a small model."


def config(srv: OllamaServer, **kw: Any) -> APIServerConfig:
    fields = {"model_name": "scripted", "base_url": srv.base + "/v1", "api_key": "", "health_check": False,
              "tokenizer_name": resolve_model_path("tiny-random"), **kw}
    return APIServerConfig(**fields)


def test_ollama_root_drops_openai_and_api_suffixes() -> None:
    assert ollama_root("http://127.0.0.1:11434/v1/") == "http://127.0.0.1:11434"
    assert ollama_root("http://h:1/api") == "http://h:1/api"  # OllamaChat drops /api itself
    assert ollama_root(None) == "http://127.0.0.1:11434"


def test_chat_completion_n_choices_with_logprobs_through_the_server_manager() -> None:
    with OllamaServer(TEXT) as srv:
        manager = ServerManager([config(srv)], server_class=OllamaAPIServer)
        out = asyncio.run(manager.chat_completion(messages=ASK, n=3, max_tokens=64, temperature=0.5, top_p=0.9,
                                                  stop="</tool_call>", seed=3, logprobs=True))
        bodies = [r["body"] for r in srv.requests]
    assert len(bodies) == 3 and all(b["model"] == "scripted" and b["messages"] == ASK for b in bodies)
    assert bodies[0]["options"] == {"num_predict": 64, "temperature": 0.5, "top_p": 0.9, "stop": ["</tool_call>"],
                                    "seed": 3}
    assert bodies[0]["logprobs"] is True and bodies[0]["stream"] is False
    assert [c.message.content for c in out.choices] == [TEXT] * 3 and [c.index for c in out.choices] == [0, 1, 2]
    entries = out.choices[0].logprobs.content
    assert "".join(e.token for e in entries) == TEXT
    assert [e.logprob for e in entries] == [OllamaServer.logprob(i) for i in range(len(entries))]
    assert out.choices[0].finish_reason == "stop" and out.usage.completion_tokens == 3 * len(entries)


def test_without_logprobs_support_choices_have_none_and_length_is_reported() -> None:
    with OllamaServer(TEXT, logprobs_supported=False) as srv:
        server = OllamaAPIServer(config(srv))
        out = asyncio.run(server.chat_completion(messages=ASK, max_tokens=2, logprobs=True))
        comp = asyncio.run(server.completion(prompt="Say hello.", max_tokens=64))
    assert out.choices[0].logprobs is None and out.choices[0].finish_reason == "length"
    assert out.choices[0].message.content == "Hello there,"
    assert comp.choices[0].text == TEXT and srv.requests[1]["body"]["messages"] == ASK


def test_tokens_and_logprobs_map_ollama_pieces_to_tokenizer_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in server tokenizes with the tiny model's tokenizer (a real Ollama uses its model's own)."""
    import llm_server
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_model_path("tiny-random"))
    monkeypatch.setattr(llm_server, "ollama_tokens", lambda text: [tok.decode([i]) for i in tok.encode(text)])
    with OllamaServer(TEXT) as srv:
        server = OllamaAPIServer(config(srv))
        prompt_ids, out_ids, out_lps, finish = asyncio.run(
            server.tokens_and_logprobs_completion(prompt="Say hello.", n=2, max_tokens=64))
    assert prompt_ids == tok.encode("Say hello.") and finish == ["stop", "stop"]
    assert out_ids == [tok.encode(TEXT)] * 2 and tok.decode(out_ids[0]) == TEXT
    assert out_lps[0] == [OllamaServer.logprob(i) for i in range(len(out_ids[0]))]
    with OllamaServer(TEXT) as srv:  # word pieces ("Hello", " there,") are not single tokens: refused, not misaligned
        monkeypatch.setattr(llm_server, "ollama_tokens", lambda text: [text[:9], text[9:]])
        with pytest.raises(ValueError, match="is not one token of the tokenizer"):
            asyncio.run(OllamaAPIServer(config(srv))._tokens_and_logprobs_completion_wrapper(prompt="x", max_tokens=8))


def test_health_check_and_a_missing_model() -> None:
    with OllamaServer(TEXT) as srv:
        server = OllamaAPIServer(config(srv, health_check=True))
        server.server_healthy = False

        async def check() -> bool:
            task = asyncio.create_task(server.check_server_status_task())
            await asyncio.sleep(0.5)
            task.cancel()
            return server.server_healthy

        assert asyncio.run(check()) is True
        missing = OllamaAPIServer(APIServerConfig(model_name="absent", base_url=srv.base, health_check=False))
        with pytest.raises(Exception, match='model "absent" not found'):
            asyncio.run(missing._chat_completion_wrapper(messages=ASK, max_tokens=4))


@pytest.mark.slow
def test_code_env_process_on_ollama(tmp_path: Any, tokenizer: Any) -> None:
    from atropos_servers import read_groups, run_env

    def reply(messages: list[dict[str, Any]]) -> str:
        return correct_code("add") if "Write `add`." in messages[-1]["content"] else correct_code("max_of_two")

    out = tmp_path / "groups.jsonl"
    with OllamaServer(reply) as srv:
        r = run_env("code_env", "process", "--env.total_steps", "1", "--env.group_size", "2", "--env.use_wandb",
                    "false", "--env.server_api", "ollama", "--env.request_logprobs", "true",
                    "--env.data_path_to_save_groups", str(out), "--openai.base_url", srv.base,
                    "--openai.model_name", "scripted", "--openai.health_check", "false")
        assert r.returncode == 0, r.stderr[-3000:]
        chats = [b["body"] for b in srv.requests]
    (group,) = read_groups(out)
    assert len(chats) == 2 and all(b["logprobs"] is True for b in chats)  # n=2: two native requests
    assert len(group["tokens"]) == 2 and len(set(group["scores"])) == 1
    # Ollama's word-sized pieces do not match the trainer's tokens one to one: no inference_logprobs
    assert "inference_logprobs" not in group
