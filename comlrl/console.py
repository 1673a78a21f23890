"""What a run prints: our own progress and warnings, not the libraries' start-up chatter.

One place for console hygiene, called by the entry points before anything heavy is imported (some of it
is read by C++ code or at import time): library INFO lines, deprecation warnings raised inside
dependencies, load progress bars and the torch C++ NUMA notice are silenced; our loggers stay at INFO
and every real library WARNING still shows. A variable the user has set is never overridden.
"""

from __future__ import annotations

import logging
import os
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


def quiet_console(level: int = logging.INFO) -> None:
    """Configure logging and warnings for a command-line run (idempotent)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    for name in OUR_LOGGERS:
        logging.getLogger(name).setLevel(level)
    for name in CHATTY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    # vLLM logs its platform probe (e.g. "Triton ... doesn't include CPU backend") while being imported,
    # before it sets up its own logger from VLLM_LOGGING_LEVEL
    logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"].upper())
    for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=LIBRARIES)
