"""An endpoint the run depends on is asked once at start-up whether it answers (comlrl/llm/reach.py): a server
that is down is one line naming the setting and exit 2, before any model loads, instead of a request failure
per call and a run trained on fallback prompts."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from comlrl.llm.errors import LLMError
from comlrl.llm.reach import check_reachable, unreachable

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


def test_a_listening_server_is_reachable_and_a_closed_port_is_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert unreachable(f"http://127.0.0.1:{port}/v1") is None
        check_reachable(f"http://127.0.0.1:{port}/v1", "x")
    closed = _closed_port()
    assert unreachable(f"http://127.0.0.1:{closed}/v1") == "Connection refused"
    with pytest.raises(LLMError) as err:
        check_reachable(f"http://127.0.0.1:{closed}/v1", "external.expert_edits_model")
    assert str(err.value) == (f"external.expert_edits_model: http://127.0.0.1:{closed}/v1 is not reachable "
                              "(Connection refused); start the server there or fix the URL")
    check_reachable("", "x")  # a vendor's default endpoint (no URL given) and local models are not probed
    check_reachable("/models/tiny", "x")


@pytest.mark.slow
def test_an_unreachable_expert_model_is_exit_2_at_start(tmp_path: Path) -> None:
    closed = _closed_port()
    run = tmp_path / "run"
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "scripts/train.py", "--config", "configs/align_T2_G4.yaml",
                          "model.name=tiny-random", "rollout.engine=hf", "logging.progress_bar=false",
                          "external.mode=expert_edits",
                          f"external.expert_edits_model=openai-compatible:foo@http://127.0.0.1:{closed}",
                          f"training.output_dir={run}"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: external.expert_edits_model: http://127.0.0.1:{closed} is not reachable (Connection refused); "
        "start the server there or fix the URL")
    assert "request failed" not in res.stderr and not run.exists()  # nothing ran, nothing is left to block a rerun
    assert time.perf_counter() - t0 < 120
