"""End-to-end trace generation against a real OpenAI-compatible HTTP server on 127.0.0.1.

The server (tests/tool_agent/scripted_server.py) runs in this process and serves a scripted reasoning model
that writes interleaved <think> text and tool calls, including malformed and unreadable calls, fixes
after the tool reports a bug, a made-up tool response, and final answers. Everything else is real: the
`openai` SDK over HTTP, the parser, the bubblewrap sandbox, the JSONL writer and the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_server import ScriptedModel, ScriptedServer

from comlrl.cli.generate_traces import main
from comlrl.llm.factory import REGISTERED
from comlrl.tasks.datasets import load_problems
from comlrl.tasks.tool_agent.call_blocks import find_tool_calls
from comlrl.tasks.tool_agent.call_format import ToolCall
from comlrl.tasks.tool_agent.call_parser import parse_tool_call

ROOT = Path(__file__).resolve().parents[2]
METRICS = {"rounds", "think_blocks", "tool_calls", "malformed_calls", "repaired_calls", "fake_responses",
           "code_iterations", "had_errors", "fixes", "tests_passed", "tests_total", "success", "well_formed",
           "ideal", "final_answer", "finish"}
EASY = load_problems("easy")


@pytest.fixture(scope="module")
def server():
    model = ScriptedModel({p.entry_point: (p.prompt, p.canonical_solution or "") for p in EASY[:10]})
    with ScriptedServer(model) as srv:
        yield srv


def read(path: Path) -> list[dict]:
    lines = path.read_text().splitlines()
    return [json.loads(line) for line in lines]


def args(server: ScriptedServer, out: Path, *extra: str) -> list[str]:
    return ["--backend", f"openai-compatible:scripted@{server.base_url}", "--out", str(out),
            "--sandbox-workers", "1", "--no-progress", *extra]


def test_cli_writes_valid_jsonl_with_metrics(server: ScriptedServer, tmp_path: Path) -> None:
    out = tmp_path / "traces.jsonl"
    before = len(server.requests)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(ROOT / "scripts" / "generate_traces.py"),
           "--backend", f"openai-compatible:scripted@{server.base_url}", "--dataset", "easy", "--limit", "6",
           "--num-traces", "6", "--out", str(out), "--logprobs", "--sandbox-workers", "1", "--batch", "3"]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "traces: 100%" in res.stderr and "wrote 6 traces" in res.stdout  # tqdm bar, summary
    assert len(server.requests) - before == 18  # 6 problems x 3 rounds
    assert all(r["stop"] == ["</tool_call>", "<tool_response>"] for r in server.requests[before:])
    records = read(out)
    assert [r["task_id"] for r in records] == [p.task_id for p in EASY[:6]]
    for k, r in enumerate(records):
        m = r["metrics"]
        assert METRICS <= set(m) and m["rounds"] == 3 and m["finish"] == "final" and m["success"]
        assert m["tests_passed"] == m["tests_total"] > 0 and m["think_blocks"] == 1 and m["tool_calls"] == 2
        assert m["fixes"] == 1 and m["code_iterations"] == (1 if k % 3 == 2 else 2)
        assert m["malformed_calls"] == (k % 3 == 2) and m["repaired_calls"] == (k % 3 == 0)
        assert m["fake_responses"] == (k % 4 == 3) and m["had_errors"] == (k % 2 == 0 or k % 3 == 2)
        assert m["ideal"] == (k % 3 == 1 and k % 4 != 3)
        text = r["text"]
        order = [text.index(t) for t in ("<think>", "<tool_call>", "<tool_response>", "</think>", "```python")]
        assert order == sorted(order) and text.count("<tool_response>") == 2  # the made-up one is gone
        assert [x["kind"] for x in r["rounds"]] == ["bad_call" if k % 3 == 2 else "tool_call", "tool_call", "final"]
        assert all(len(x["tokens"]) == len(x["logprobs"]) > 0 for x in r["rounds"])
        assert [m["role"] for m in r["messages"]] == ["system", "user", "assistant", "user", "assistant", "user",
                                                      "assistant"]
        assert r["final_code"].startswith(EASY[k].prompt.split("\n")[0]) and r["backend"].startswith("openai-")
    bad = records[2]["rounds"][0]["tool_response"]
    assert '"error": "invalid tool call (invalid_json)"' in bad and "hint" in bad  # structured error back


def test_resume_appends_only_missing_problems(server: ScriptedServer, tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    assert main(args(server, out, "--dataset", "easy", "--limit", "4", "--num-traces", "2")) == 0
    assert [r["task_id"] for r in read(out)] == ["Easy/0", "Easy/1"]
    with out.open("a") as fh:  # a run killed mid-write leaves a torn line
        fh.write('{"task_id": "Easy/2", "te')
    before = len(server.requests)
    assert main(args(server, out, "--dataset", "easy", "--limit", "4", "--num-traces", "4")) == 0
    assert [r["task_id"] for r in read(out)] == ["Easy/0", "Easy/1", "Easy/2", "Easy/3"]
    asked = {json.dumps(r["messages"][1]) for r in server.requests[before:]}
    assert len(asked) == 2  # only the two missing problems were generated
    assert main(args(server, out, "--dataset", "easy", "--limit", "4", "--num-traces", "4")) == 0
    assert len(read(out)) == 4


def test_only_ideal_chat_format_is_fine_tuning_ready(server: ScriptedServer, tmp_path: Path) -> None:
    out = tmp_path / "chat.jsonl"
    assert main(args(server, out, "--dataset", "easy", "--limit", "8", "--num-traces", "8", "--only-ideal",
                     "--chat-format")) == 0
    records = read(out)
    assert [r["task_id"] for r in records] == ["Easy/1", "Easy/4"]  # k % 3 == 1 and not k % 4 == 3
    for r in records:
        assert set(r) == {"task_id", "entry_point", "backend", "attempt", "messages", "metrics"}
        roles = [m["role"] for m in r["messages"]]
        assert roles[:2] == ["system", "user"] and roles[2::2] == ["assistant"] * 3 and roles[3::2] == ["user"] * 2
        for m in r["messages"][2::2]:
            for span in find_tool_calls(m["content"]):
                assert span.closed and parse_tool_call(span.raw).repair == "strict"


def test_chat_format_rewrites_repaired_calls(server: ScriptedServer, tmp_path: Path) -> None:
    out = tmp_path / "c.jsonl"
    assert main(args(server, out, "--dataset", "easy", "--limit", "1", "--num-traces", "1", "--chat-format")) == 0
    (r,) = read(out)
    assert r["metrics"]["repaired_calls"] == 1
    (span,) = find_tool_calls(r["messages"][2]["content"])
    assert parse_tool_call(span.raw).repair == "strict" and "checking add" in span.raw


def test_only_success_skips_and_retries_failures(server: ScriptedServer, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    unknown = {"task_id": "U/0", "prompt": "def mystery(x):\n    \"\"\"?\"\"\"\n", "entry_point": "mystery",
               "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    known = {"task_id": EASY[0].task_id, "prompt": EASY[0].prompt, "entry_point": EASY[0].entry_point,
             "test": EASY[0].test}
    data.write_text(json.dumps(unknown) + "\n" + json.dumps(known) + "\n")
    out = tmp_path / "s.jsonl"
    before = len(server.requests)
    assert main(args(server, out, "--dataset", str(data), "--num-traces", "5", "--only-success", "--attempts", "2",
                     "--max-rounds", "2")) == 0
    assert [r["task_id"] for r in read(out)] == ["Easy/0"]
    mystery = [r for r in server.requests[before:] if "mystery" in r["messages"][1]["content"]]
    assert len(mystery) == 2 * 2  # two attempts of two rounds (prose never ends an episode early)
    (rec,) = read(out)
    assert rec["metrics"]["finish"] == "max_rounds" and rec["metrics"]["rounds"] == 2


def test_bad_arguments_fail_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["--backend", "nope:x", "--out", str(out), "--num-traces", "1", "--no-progress"]) == 2
    assert ("--backend='nope:x' is not allowed; expected one of: local:<path or alias>, openai-compatible:"
            in capsys.readouterr().err)
    assert main(["--backend", "local:x", "--out", str(out), "--num-traces", "0"]) == 2
    assert main(["--backend", "local:x", "--dataset", str(tmp_path / "none.jsonl"), "--out", str(out),
                 "--num-traces", "1"]) == 2


def test_backend_from_a_provider_a_plugins_module_registers(server: ScriptedServer, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`--plugins` imports a user module that registers `loop:<model>` (its own endpoint: the loopback server)."""
    (tmp_path / "loop_provider.py").write_text(
        "from comlrl.llm.openai_client import OpenAIClient\n"
        "from comlrl.config.registry import register_provider\n\n\n"
        "@register_provider('loop')\n"
        "def loop(model, settings, *, metrics=None):\n"
        f"    return OpenAIClient(model, settings, api_key=None, base_url={server.base_url!r}, provider='loop',\n"
        "                        metrics=metrics)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "t.jsonl"
    before = len(server.requests)
    try:
        assert main(["--plugins", "loop_provider", "--backend", "loop:scripted", "--out", str(out), "--dataset", "easy",
                     "--limit", "1", "--num-traces", "1", "--sandbox-workers", "1", "--no-progress"]) == 0
    finally:
        REGISTERED.pop("loop", None)
        sys.modules.pop("loop_provider", None)
    (record,) = read(out)
    assert record["backend"] == f"loop:scripted@{server.base_url}" and record["metrics"]["success"]
    assert len(server.requests) - before == record["metrics"]["rounds"] == 3


def test_a_plugins_module_that_fails_to_import_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.jsonl"
    assert main(["--plugins", "no_such_module_here", "--backend", "local:x", "--out", str(out),
                 "--num-traces", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--plugins: cannot import 'no_such_module_here': ModuleNotFoundError" in err
    assert not out.exists()


def test_training_format_is_one_assistant_message_per_trace(server: ScriptedServer, tmp_path: Path) -> None:
    chat, training = tmp_path / "chat.jsonl", tmp_path / "training.jsonl"
    common = ("--dataset", "easy", "--limit", "3", "--num-traces", "3")
    assert main(args(server, chat, *common, "--chat-format")) == 0
    assert main(args(server, training, *common, "--training-format")) == 0
    for c, t in zip(read(chat), read(training), strict=True):
        assert set(t) == {"task_id", "entry_point", "backend", "attempt", "messages", "metrics"}
        system, user, trace = t["messages"]
        assert (system, user) == tuple(c["messages"][:2]) and trace["role"] == "assistant"
        # the chat format's rounds and tool responses, in order, as one message
        assert trace["content"] == "\n".join(m["content"] for m in c["messages"][2:])
        assert trace["content"].count("<tool_response>") == 2 and trace["content"].rstrip().endswith("```")
        calls = [parse_tool_call(span.raw) for span in find_tool_calls(trace["content"])]
        strict = [isinstance(x, ToolCall) and x.repair == "strict" for x in calls]
        assert strict == ([False, True] if t["metrics"]["malformed_calls"] else [True, True])  # repaired: rewritten
    assert [r["metrics"]["repaired_calls"] for r in read(training)] == [1, 0, 0]
    with pytest.raises(SystemExit):  # one format at a time
        main(args(server, tmp_path / "x.jsonl", *common, "--chat-format", "--training-format"))


def test_answer_prefix_is_continued_and_kept(server: ScriptedServer, tmp_path: Path) -> None:
    out = tmp_path / "p.jsonl"
    before = len(server.requests)
    assert main(args(server, out, "--dataset", "easy", "--limit", "2", "--num-traces", "2",
                     "--answer-prefix", "<think>\\n")) == 0
    sent = server.requests[before:]
    assert sent and all(r["messages"][-1] == {"role": "assistant", "content": "<think>\n"} for r in sent)
    for r in read(out):
        assert all(x["completion"].startswith("<think>\n") for x in r["rounds"])
        assert not r["rounds"][0]["completion"].startswith("<think>\n<think>")  # continued, not repeated
        assert r["metrics"]["success"] and r["metrics"]["think_blocks"] >= 1
