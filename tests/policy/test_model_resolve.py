"""resolve_model_path: aliases, local dirs, GGUF files, bad names, atomic conversion."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch

from comlrl import models
from comlrl.config.schema import EMBEDDED_MODEL
from comlrl.models import ModelError, cache_root, resolve_model_path

torch.set_num_threads(1)


def _one_line_naming(exc: BaseException, name: str) -> None:
    msg = str(exc)
    assert "\n" not in msg and repr(name) in msg, msg


def test_tiny_random_alias_is_a_cached_hf_dir_with_chat_template() -> None:
    path = Path(resolve_model_path("tiny-random"))
    assert (path / "config.json").is_file() and (path / "chat_template.jinja").is_file()
    assert path.parent == cache_root()
    t = time.perf_counter()
    assert resolve_model_path("tiny-random") == str(path)  # second call: no rebuild
    assert time.perf_counter() - t < 0.5


def test_tiny_random_is_deterministic(tmp_path: Path) -> None:
    """A rebuild gives bit-identical weights (the cached copy was built by an earlier process)."""
    from safetensors.torch import load_file

    cached = load_file(Path(resolve_model_path("tiny-random")) / "model.safetensors")
    models._build_tiny_random(tmp_path, cache_root())
    fresh = load_file(tmp_path / "model.safetensors")
    assert fresh.keys() == cached.keys() and all(torch.equal(fresh[k], cached[k]) for k in fresh)


def test_local_dir_is_returned_as_is() -> None:
    path = resolve_model_path("tiny-random")
    assert resolve_model_path(path) == path


def test_cache_dir_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COMLRL_CACHE", str(tmp_path))
    assert cache_root() == tmp_path.resolve()
    assert cache_root(str(tmp_path / "x")) == (tmp_path / "x").resolve()


@pytest.mark.parametrize("kind", ["hub", "empty_dir", "missing_gguf", "not_gguf"])
def test_bad_names_fail_in_one_line_naming_the_model(kind: str, tmp_path: Path) -> None:
    name = {
        "hub": "no-such-org/no-such-model-xyz",
        "empty_dir": str(tmp_path),
        "missing_gguf": str(tmp_path / "nothing.gguf"),
        "not_gguf": str(tmp_path / "weights.bin"),
    }[kind]
    if kind == "not_gguf":
        Path(name).write_bytes(b"x")
    with pytest.raises(ModelError) as info:
        resolve_model_path(name, cache_dir=str(tmp_path / "cache"))
    _one_line_naming(info.value, name)


@pytest.mark.parametrize("form", ["absolute", "relative", "home"])
def test_a_missing_local_path_says_so_not_the_hub(form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    name = {"absolute": str(tmp_path / "models" / "my-model"), "relative": "./models/my-model",
            "home": "~/models/my-model"}[form]
    with pytest.raises(ModelError) as info:
        resolve_model_path(name, cache_dir=str(tmp_path / "cache"))
    assert str(info.value) == (f"model error: cannot load model {name!r}: "
                               f"local path {tmp_path / 'models' / 'my-model'} "
                               "does not exist")


def test_broken_gguf_fails_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf file at all")
    with pytest.raises(ModelError) as info:
        resolve_model_path(str(bad), cache_dir=str(tmp_path / "cache"))
    _one_line_naming(info.value, str(bad))
    assert not [p for p in (tmp_path / "cache").iterdir() if p.is_dir()]  # no half-written model left


def _fake_build(calls: list[int], delay: float = 0.2):
    def build(out: Path) -> None:
        calls.append(1)
        time.sleep(delay)
        (out / "config.json").write_text(json.dumps({"ok": True}))
    return build


def test_concurrent_builds_convert_once_and_agree(tmp_path: Path) -> None:
    calls: list[int] = []
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(models._build_once(tmp_path, "m", _fake_build(calls))))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(results)) == 1 and (results[0] / "config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["m"]  # no tmp dirs left


def test_losing_the_rename_race_keeps_the_winner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a working lock (e.g. NFS) another process may publish first: its result is used."""
    monkeypatch.setattr(models, "FileLock", lambda path: __import__("contextlib").nullcontext())

    def build(out: Path) -> None:
        (out / "config.json").write_text("{}")
        winner = tmp_path / "m"
        winner.mkdir()
        (winner / "config.json").write_text('{"winner": true}')
        (winner / "weights").write_text("w")

    dest = models._build_once(tmp_path, "m", build)
    assert json.loads((dest / "config.json").read_text()) == {"winner": True}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["m"]


@pytest.mark.slow
def test_embedded_alias_converts_to_float32_without_quantization_config() -> None:
    from transformers import AutoConfig, AutoTokenizer

    path = resolve_model_path(EMBEDDED_MODEL)
    cfg = AutoConfig.from_pretrained(path)
    assert getattr(cfg, "quantization_config", None) is None and cfg.model_type == "llama"
    tok = AutoTokenizer.from_pretrained(path)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")


@pytest.mark.slow
@pytest.mark.embedded
def test_gguf_path_converts_once_and_matches_alias(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    gguf = models.embedded_gguf()
    path = Path(resolve_model_path(str(gguf), cache_dir=str(tmp_path)))
    assert path.parent == tmp_path.resolve() and path.name.startswith("gguf-")
    assert resolve_model_path(str(gguf), cache_dir=str(tmp_path)) == str(path)
    alias = Path(resolve_model_path(EMBEDDED_MODEL))
    a, b = load_file(path / "model.safetensors"), load_file(alias / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert all(v.dtype == torch.float32 for v in a.values())


def test_the_public_id_is_what_a_user_loads_on_another_machine(tmp_path: Path) -> None:
    """Exported adapters named a folder of this machine's cache as their base (issue 36, item 10): the embedded
    alias is the published SmolLM2-135M-Instruct, a hub id is itself; a model built here (tiny-random), a
    local folder and a GGUF file have no public id."""
    from comlrl.models import public_model_id

    folder = tmp_path / "Org" / "model"
    folder.mkdir(parents=True)
    assert public_model_id(EMBEDDED_MODEL) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert public_model_id("Qwen/Qwen2.5-Coder-0.5B-Instruct") == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    assert public_model_id("gpt2") == "gpt2"
    for local in ("tiny-random", str(folder), "./models/x", "~/m", "a/b/c", "model.Q4_1.gguf"):
        assert public_model_id(local) is None, local
