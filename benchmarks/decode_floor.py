"""The float32 decode floor of the CoMLRL-style script (benchmarks/compat_speed.py): how long its generation takes
at best on this host, whatever the engine does around the model.

A decode step of a small model at batch 2-4 reads every weight once; its time is that read. Measured here on the
embedded SmolLM2-135M in float32, one torch thread (how each agent decodes beside the other): the weights' bytes,
a bare KV-cache decode step at the script's batch sizes (2 rows at turn 1, 4 at turn 2), the lm_head matmul alone
(a weight too big for any cache: the DRAM rate), then both agents' steps at once in two threads as the trainer
runs them (`comlrl.cores.side_by_side`; they share the memory bus). The floor is the script's decode steps (8
trees x 2 turns x 16 tokens) at the side-by-side rate; the prefills come on top.

    python benchmarks/decode_floor.py [--steps 16]      # writes benchmarks/results/decode_floor.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from functools import partial

from _common import RESULTS, setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=16, help="decode steps timed per measure (default 16)")
    args = parser.parse_args()
    setup(threads=1)
    import torch
    from compat_speed import host
    from transformers import AutoModelForCausalLM

    from comlrl.cores import side_by_side
    from comlrl.models import resolve_model_path

    path = resolve_model_path("smollm2-135m-instruct")
    models = [AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval() for _ in range(2)]
    weight_bytes = sum(p.numel() * p.element_size() for p in models[0].parameters())

    def decode_ms(model, rows: int) -> float:
        """Median ms of one decode step after a 60-token prefill, `rows` rows, greedy, bare loop."""
        with torch.no_grad():
            out = model(torch.randint(0, 1000, (rows, 60)), use_cache=True)
            nxt, times = out.logits[:, -1:].argmax(-1), []
            for _ in range(args.steps):
                t = time.perf_counter()
                out = model(nxt, past_key_values=out.past_key_values, use_cache=True)
                nxt = out.logits[:, -1:].argmax(-1)
                times.append(time.perf_counter() - t)
        return 1000 * statistics.median(times)

    head = models[0].get_output_embeddings().weight
    x = torch.randn(4, head.shape[1])
    with torch.no_grad():
        torch.nn.functional.linear(x, head)
        t = time.perf_counter()
        for _ in range(args.steps):
            torch.nn.functional.linear(x, head)
        head_ms = 1000 * (time.perf_counter() - t) / args.steps
    alone = {rows: decode_ms(models[0], rows) for rows in (2, 4)}
    torch.set_num_threads(2)  # side_by_side: one thread each, both at once
    both = {rows: max(side_by_side([partial(decode_ms, m, rows) for m in models])) for rows in (2, 4)}
    trees, tokens = 8, 16
    floor_s = trees * tokens * (both[2] + both[4]) / 1000
    out = {"host": host(), "weight_mb": round(weight_bytes / 1e6, 1),
           "lm_head_mb": round(head.numel() * head.element_size() / 1e6, 1), "lm_head_ms_batch4": round(head_ms, 2),
           "lm_head_gb_per_s": round(head.numel() * head.element_size() / head_ms / 1e6, 2),
           "decode_step_ms_one_agent": {str(k): round(v, 1) for k, v in alone.items()},
           "decode_step_ms_two_agents_at_once": {str(k): round(v, 1) for k, v in both.items()},
           "script_decode_floor_s": round(floor_s, 1)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decode_floor.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
