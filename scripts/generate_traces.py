"""Generate interleaved reasoning + tool-call traces (JSONL) with a local model or an OpenAI-compatible server.

    python scripts/generate_traces.py --backend local:smollm2-135m-instruct --dataset easy --num-traces 8 \
        --out traces.jsonl [--only-success] [--only-ideal] [--chat-format] [--max-rounds 4]
    python scripts/generate_traces.py --backend openai-compatible:qwen2.5-coder:7b@http://127.0.0.1:11434/v1 \
        --dataset humaneval --num-traces 164 --out traces.jsonl

See docs/tool-agent.md; `--help` lists every option.
"""

from __future__ import annotations

import sys

from comlrl.cli.generate_traces import main  # also the console script comlrl-traces

if __name__ == "__main__":
    sys.exit(main())
