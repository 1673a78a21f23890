"""Start a rollout server for runs of one config: a vLLM engine in its own process (on its own GPUs in
production) that serves every training rank of `rollout.engine=vllm_server rollout.server.url=URL`.

    comlrl-serve --config configs/align_T2_G4.yaml [key=value ...] [--port 8100] [--host 127.0.0.1]
    comlrl-train --config configs/align_T2_G4.yaml rollout.engine=vllm_server rollout.server.url=http://127.0.0.1:8100

The model, dtype, lengths and vLLM settings come from the run config, so the server fits the runs that use
it. The trainer pushes its weights as files in /dev/shm: run the server on the machine that trains. One run
at a time: a server holds one run's policy versions. Without a URL the trainer starts and stops its own.
The server has no authentication (a push names files it loads): keep it on loopback, the default.
"""

from __future__ import annotations

import argparse
import sys

from comlrl.cli import add_version
from comlrl.config.schema import ConfigError, load_config
from comlrl.cores import share_cores


def main(argv: list[str] | None = None) -> int:
    share_cores()  # before anything imports torch: OpenMP reads it once
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_version(ap)
    ap.add_argument("--config", default=None, help="the run config the server is for (schema defaults without it)")
    ap.add_argument("--host", default="127.0.0.1",
                    help="address to listen on (default loopback; the server has no authentication)")
    ap.add_argument("--port", type=int, default=8100, help="0: a free port (the first line printed names it)")
    ap.add_argument("overrides", nargs="*", help="key=value overrides, as for comlrl-train")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    from comlrl.engines import rollout_server
    from comlrl.models import ModelError, resolve_model_path

    m, v = cfg.model, cfg.rollout.vllm
    try:
        path = resolve_model_path(m.name, m.cache_dir)
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return rollout_server.main([
        "--model", path, "--dtype", m.dtype, "--max-model-len", str(m.max_prompt_tokens + m.max_new_tokens),
        "--seed", str(cfg.training.seed), "--kv-cache-gib", str(v.kv_cache_gib),
        "--gpu-memory-utilization", str(v.gpu_memory_utilization), "--host", args.host, "--port", str(args.port),
        *([] if v.enforce_eager else ["--compile"])])


if __name__ == "__main__":
    sys.exit(main())
