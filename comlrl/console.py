"""What a run prints: our own progress and warnings, not the libraries' start-up chatter.

One place for console hygiene, called by the entry points before anything heavy is imported (some of it
is read by C++ code or at import time): library INFO lines, deprecation warnings raised inside
dependencies, load progress bars, the torch C++ NUMA notice and DeepSpeed's notice that it picked its CPU
accelerator (on a machine without a GPU, what this project expects) are silenced; our loggers stay at INFO
and every real library WARNING still shows. A variable the user has set is never overridden.

Under a launcher, every rank runs the same set-up and would print the same fallback (sandbox isolation,
vLLM -> hf) once per rank: our INFO and WARNING lines come from rank 0 only (accelerate's own
`main_process_only` convention), ERRORs from every rank.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

OUR_LOGGERS = ("comlrl", "sandbox", "feedback", "generate_traces")
# one INFO line per HTTP request otherwise; vLLM's own level is VLLM_LOGGING_LEVEL (set below)
CHATTY_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "anthropic", "urllib3")
# packages whose own deprecation warnings (about their dependencies' APIs) are not the user's to fix
LIBRARIES = r"(vllm|transformers|torch|accelerate|peft|deepspeed|trl|huggingface_hub|triton)(\.|$)"
QUIET_ENV = {
    "TORCH_CPP_LOG_LEVEL": "ERROR",  # c10 warnings such as the NUMA binding notice of vLLM's CPU worker
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # transformers' "Loading weights" bar (read at import)
    "VLLM_LOGGING_LEVEL": "ERROR",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


# logged by DeepSpeed's accelerator probe, on import, wherever no GPU is found
DEEPSPEED_CPU_NOTICE = "Setting accelerator to CPU."


def _not_deepspeed_cpu_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DEEPSPEED_CPU_NOTICE)


def launcher_rank() -> int:
    """This process's rank as the launcher (torchrun, accelerate, deepspeed) exported it; 0 when launched alone.
    Read from the environment, so it is known before torch is imported."""
    return int(os.environ.get("RANK", "0") or 0)


def _from_rank_0(record: logging.LogRecord) -> bool:
    """On ranks > 0, our loggers' lines below ERROR are rank 0's lines again: leave them to rank 0."""
    ours = record.name.split(".", 1)[0] in OUR_LOGGERS
    return not ours or record.levelno >= logging.ERROR or launcher_rank() == 0


def quiet_console(level: int = logging.INFO) -> None:
    """Configure logging and warnings for a command-line run (idempotent)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_from_rank_0)  # addFilter keeps one copy: idempotent
    # DeepSpeed's logger has its own handler and does not propagate: filtered on the logger itself
    logging.getLogger("DeepSpeed").addFilter(_not_deepspeed_cpu_notice)
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # vLLM logs its platform probe (e.g. "Triton ... doesn't include CPU backend") while being imported,
    # before it sets up its own logger from VLLM_LOGGING_LEVEL
    logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"].upper())
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=LIBRARIES)
    if "transformers" in sys.modules:  # imported before this call (a script's own model): its bars ("Writing
        # model shards" at every save) read the environment at import, so they are turned off here too
        sys.modules["transformers"].utils.logging.disable_progress_bar()


def plural(n: int, word: str) -> str:
    """`1 step`, `2 steps`: a count with its noun (regular plurals only)."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
