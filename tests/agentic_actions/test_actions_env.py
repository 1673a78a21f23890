"""The action environment: workspace confinement, the loopback API, run_python, checks, task files, replay."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from act_refs import REFERENCE, act

from comlrl.tasks.actions import (
    REGISTRY,
    ActionsTask,
    Environment,
    Observation,
    Param,
    Pattern,
    TaskFileError,
    Workspace,
    WorkspaceError,
    bundled_tasks_path,
    load_action_tasks,
    register_check,
    register_pattern,
)
from comlrl.tasks.actions.environment import render_turn
from comlrl.tasks.actions.harness import run_in_sandbox
from comlrl.tasks.actions.patterns import PATTERNS
from comlrl.tasks.actions.taskfile import problem_from_record

API_TASK = {
    "task_id": "api", "pattern": "troubleshooting", "goal": "Fix the service.",
    "files": {"notes/readme.txt": "hello\n"},
    "api": {"host": "svc.example.test", "endpoints": [
        {"method": "GET", "path": "/v1/health", "response": {"status": "degraded"},
         "when": [{"stored": {"fix": {"on": True}}, "response": {"status": "ok"}}]},
        {"method": "POST", "path": "/v1/fix", "require": {"on": True}, "store": "fix", "response": {"saved": True}}]},
    "checks": [{"type": "api_called", "method": "POST", "path": "/v1/fix", "body": {"on": True}},
               {"type": "file_exists", "path": "out/result.txt"},
               {"type": "completed"}],
}


@pytest.fixture()
def env(sandbox, tmp_path: Path):
    e = Environment(sandbox=sandbox, role_names=["operator", "reviewer"], max_turns=3, root=tmp_path / "ws")
    yield e
    e.close()


# ---------------------------------------------------------------------------------------- workspace


@pytest.mark.parametrize("bad, why", [
    ("../escape.txt", "'..' is not allowed"), ("a/../../x", "'..' is not allowed"),
    ("/etc/passwd", "absolute paths"), ("~/x", "absolute paths"), ("C:/x", "absolute paths"),
    ("", "empty"), (".", "workspace itself"), ("a\x00b", "invalid path"),
])
def test_workspace_refuses_paths_that_leave_it(tmp_path: Path, bad: str, why: str) -> None:
    ws = Workspace(tmp_path / "w")
    with pytest.raises(WorkspaceError, match=why):
        ws.write(bad, "x")
    assert not (tmp_path / "escape.txt").exists()


def test_workspace_refuses_symlinks(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    ws = Workspace(tmp_path / "w")
    os.symlink(secret, ws.root / "link.txt")
    os.symlink(tmp_path, ws.root / "dirlink")
    for path in ("link.txt", "dirlink/secret.txt"):
        with pytest.raises(WorkspaceError, match="symbolic links"):
            ws.read(path)
        with pytest.raises(WorkspaceError, match="symbolic links"):
            ws.write(path, "overwritten")
    assert secret.read_text() == "top secret"
    assert ws.list() == []  # symlinks are never listed (nor followed)


def test_workspace_limits_and_subdirectories(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "w", max_file_chars=10, max_files=2)
    ws.write("a/b/c.txt", "hi")
    assert ws.read("a/b/c.txt") == "hi" and ws.list() == ["a/b/c.txt"]
    with pytest.raises(WorkspaceError, match="above the limit"):
        ws.write("big.txt", "x" * 11)
    with pytest.raises(WorkspaceError, match="is a file"):
        ws.write("a/b/c.txt/x", "")
    ws.write("two.txt", "2")
    ws.write("two.txt", "22")  # overwriting does not count as a new file
    with pytest.raises(WorkspaceError, match="already holds 2 files"):
        ws.write("three.txt", "3")


# ------------------------------------------------------------------------------------------- steps


def test_actions_run_in_the_workspace_and_the_api(env: Environment) -> None:
    prob = problem_from_record(API_TASK)
    s0 = env.reset(prob)
    assert [c.passed for c in s0.checks] == [False, False, False]
    s1 = env.step(prob, s0, [
        act("api_call", method="GET", url="http://svc.example.test/v1/health"),
        act("api_call", method="POST", url="http://svc.example.test/v1/fix", body={"on": True}),
    ])
    assert [c["path"] for c in s1.api.calls] == ["/v1/health", "/v1/fix"]
    obs = render_turn(s1.transcript[-1])
    assert '"degraded"' in obs and "[reviewer] api_call: ok" in obs
    s2 = env.step(prob, s1, [
        act("api_call", method="GET", url="http://svc.example.test/v1/health"),
        act("run_python", code="import os\nos.makedirs('out', exist_ok=True)\n"
                               "open('out/result.txt', 'w').write(open('notes/readme.txt').read().upper())\n"
                               "print('wrote')"),
    ])
    assert '"ok"' in render_turn(s2.transcript[-1])  # the API state is the trajectory's own
    assert s2.workspace().read("out/result.txt") == "HELLO\n"  # files written by run_python are kept
    assert [c.passed for c in s2.checks] == [True, True, False]
    s3 = env.step(prob, s2, [act("read_file", path="out/result.txt"),
                             act("complete_task", summary="fixed")])
    assert s3.done and s3.finished_by == "complete_task" and s3.summary == "fixed"
    assert all(c.passed for c in s3.checks)
    # the parents are untouched: sibling trajectories never see each other's changes
    assert s0.api.calls == [] and not s1.workspace().exists("out/result.txt")
    after = env.step(prob, s3, [act("create_file", path="late.txt", content="x"), "no action"])
    assert after.transcript[-1].after_done and not after.workspace().exists("late.txt")


def test_bad_actions_become_observations_never_exceptions(env: Environment) -> None:
    prob = problem_from_record(API_TASK)
    s0 = env.reset(prob)
    s1 = env.step(prob, s0, [
        '```json\n{"action": "create_file", "parameters": {"path": "../x", "content": "x"}}\n```',
        '{"action": "api_call", "parameters": {"method": "GET", "url": "http://evil.example.com/"}}',
    ])
    obs = render_turn(s1.transcript[-1])
    assert "'..' is not allowed" in obs and "host 'evil.example.com' is not allowed" in obs
    s2 = env.step(prob, s1, [
        act("api_call", method="GET", url=f"http://127.0.0.1:{env.server.port}/v1/health"),
        '{"action": "api_call", "parameters": {"method": "GET", "url": "file:///etc/passwd"}}',
    ])
    obs = render_turn(s2.transcript[-1])
    assert "'127.0.0.1' is not allowed" in obs and "only http(s) URLs" in obs
    s3 = env.step(prob, s2, ["```json\n{broken\n```", '{"action": "teleport", "parameters": {}}'])
    obs = render_turn(s3.transcript[-1])
    assert "action error (malformed_json)" in obs and "action error (unknown_type)" in obs
    assert s3.done and s3.finished_by == "turn_limit"


def test_api_server_is_loopback_only_and_needs_a_live_trajectory(env: Environment) -> None:
    import http.client

    assert env.server.httpd.server_address[0] == "127.0.0.1"
    conn = http.client.HTTPConnection("127.0.0.1", env.server.port, timeout=5)
    conn.request("GET", "/v1/health")  # no trajectory header: refused
    resp = conn.getresponse()
    assert resp.status == 403 and b"unknown client" in resp.read()
    conn.close()


def test_run_python_is_sandboxed(sandbox) -> None:
    run = run_in_sandbox(sandbox, "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=1)", {})
    assert not run.ok and run.error
    run = run_in_sandbox(sandbox, "print(open('a.txt').read()); import os; print(sorted(os.listdir('.')))",
                         {"a.txt": "data", "d/b.txt": "b"})
    assert run.ok and "data" in run.stdout and "['a.txt', 'd']" in run.stdout
    run = run_in_sandbox(sandbox, "while True: pass", {})
    assert not run.ok and "timed out" in (run.error or "")
    run = run_in_sandbox(sandbox, "def f(:\n  pass", {})
    assert not run.ok and "SyntaxError" in (run.error or "")
    run = run_in_sandbox(None, "print(1)", {})
    assert not run.ok and "no sandbox" in (run.error or "")


def test_replay_gives_the_same_state(env: Environment) -> None:
    prob = problem_from_record(API_TASK)
    history = [
        (act("api_call", method="POST", url="http://svc.example.test/v1/fix", body={"on": True}),
         act("create_file", path="out/result.txt", content="done")),
        (act("read_file", path="out/result.txt"), act("complete_task", summary="ok")),
    ]
    a = env.replay(prob, history)
    b = env.replay(prob, history)
    assert a.key == b.key and a.dir != b.dir
    assert a.workspace().snapshot() == b.workspace().snapshot()
    assert a.api.calls == b.api.calls and [c.passed for c in a.checks] == [c.passed for c in b.checks]
    assert [render_turn(r) for r in a.transcript] == [render_turn(r) for r in b.transcript]


def test_user_action_types_run_in_the_environment(sandbox, tmp_path: Path) -> None:
    reg = REGISTRY.copy()
    reg.register("word_count", [Param("path")], lambda a, c: Observation(
        True, f"{len(c.workspace.read(a.params['path']).split())} words"), description="count words")
    env = Environment(registry=reg, sandbox=sandbox, root=tmp_path / "ws")
    try:
        prob = problem_from_record(API_TASK)
        s1 = env.step(prob, env.reset(prob), [act("word_count", path="notes/readme.txt")])
        assert "1 words" in render_turn(s1.transcript[-1])
    finally:
        env.close()


# --------------------------------------------------------------------------------------- task files


def test_bundled_task_file() -> None:
    probs = load_action_tasks(bundled_tasks_path())
    assert len(probs) == 12
    patterns = {p.pattern for p in probs}
    assert patterns == {"troubleshooting", "setup_workflow", "iterative_improvement"}
    assert all(p.checks for p in probs) and len({p.task_id for p in probs}) == 12
    assert sum(p.api is not None for p in probs) >= 4
    assert set(REFERENCE) == {p.task_id for p in probs}


def test_every_bundled_task_is_solvable_and_unsolved_at_the_start(sandbox, tmp_path: Path) -> None:
    """The reference answers of act_refs.py pass every success check; the initial workspace passes none."""
    task = ActionsTask(sandbox, root=str(tmp_path / "ws"))
    try:
        for prob in load_action_tasks(bundled_tasks_path()):
            assert not all(c.passed for c in task.state(prob, ()).checks), prob.task_id
            history: tuple = ()
            for texts in REFERENCE[prob.task_id]:
                reward = task.score_paths([(prob, list(texts), history)])[0]
                history = (*history, tuple(texts))
            assert reward.all_passed and reward.done, (prob.task_id, task.state(prob, history).checks)
            assert reward.components["judge/task_completion"] == 10.0
    finally:
        task.close()


@pytest.mark.parametrize("patch, message", [
    ({"pattern": "nope"}, "unknown pattern"),
    ({"checks": []}, "at least one success check"),
    ({"checks": [{"type": "magic"}]}, "unknown check type"),
    ({"checks": [{"type": "file_contains", "path": "a"}]}, "needs 'text' or 'pattern'"),
    ({"checks": [{"type": "python"}]}, "needs 'code'"),
    ({"files": {"../x": "y"}}, "'..' is not allowed"),
    ({"api": {"endpoints": []}}, "needs 'host'"),
    ({"goal": 3}, "field 'goal' has the wrong type"),
    ({"api": {"host": "a.test", "endpoints": [{"path": "/x", "status": "200"}]}}, "'status' must be an integer"),
    ({"api": {"host": "a.test", "endpoints": [{"path": "x"}]}}, "needs 'path' starting with '/'"),
])
def test_task_file_errors_name_the_line(tmp_path: Path, patch: dict, message: str) -> None:
    rec = {**API_TASK, **patch}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(API_TASK | {"task_id": "ok"}) + "\n\n" + json.dumps(rec) + "\n")
    with pytest.raises(TaskFileError, match=message) as info:
        load_action_tasks(path)
    assert f"{path}:3" in str(info.value)


def test_custom_patterns_and_checks(sandbox, tmp_path: Path) -> None:
    register_pattern(Pattern("interview", "Q: {goal}", ('Follow-up on {files}; reply like {"ok": true}.',)),
                     replace=True)
    register_check("line_count", lambda p, c: (len(c.files.get(p["path"], "").splitlines()) == p["n"], ""),
                   ("path", "n"))
    try:
        rec = {"task_id": "c", "pattern": "interview", "goal": "Write two lines.", "files": {"a.txt": "1\n"},
               "checks": [{"type": "line_count", "path": "a.txt", "n": 2}]}
        prob = problem_from_record(rec)
        assert (prob.prompt == "Q: Write two lines."
                and prob.user_turn(2) == 'Follow-up on a.txt; reply like {"ok": true}.')
        env = Environment(sandbox=sandbox, root=tmp_path / "ws")
        s1 = env.step(prob, env.reset(prob), [act("create_file", path="a.txt", content="1\n2\n")])
        assert [c.passed for c in s1.checks] == [True]
        env.close()
    finally:
        PATTERNS.pop("interview", None)
