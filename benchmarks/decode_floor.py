"""The float32 decode floor of the CoMLRL-style script (benchmarks/compat_speed.py): how long its generation takes
at best on this host, whatever the engine does around the model.

A decode step of a small model at batch 2-4 reads every weight once; at best its time is that read. Measured here
on the embedded SmolLM2-135M in float32, one torch thread (how each agent decodes beside the other): the weights'
bytes, a bare KV-cache decode step at the script's batch sizes (2 rows at turn 1, 4 at turn 2), the lm_head matmul
alone (a weight too big for any cache), then both agents' steps at once in two threads as the trainer runs them
(`comlrl.cores.side_by_side`; they share the memory bus). Each with torch's own float32 matmul (MKL) and with the
packed weights generation uses (`comlrl.policy.packed_linear`). The floor is the script's decode steps (8 trees x 2
turns x 16 tokens) at the side-by-side rate; the prefills come on top.

    python benchmarks/decode_floor.py [--steps 16]      # writes benchmarks/results/decode_floor.json
"""

from __future__ import annotations

import argparse
import contextlib
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
    from comlrl.policy.packed_linear import PackedLinears

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

    def head_ms(lm_head: torch.nn.Linear) -> float:
        """Mean ms of the lm_head times 4 rows (a decode step's last matmul)."""
        x = torch.randn(4, lm_head.in_features)
        with torch.no_grad():
            lm_head(x)
            t = time.perf_counter()
            for _ in range(args.steps):
                lm_head(x)
        return 1000 * (time.perf_counter() - t) / args.steps

    def served(packs: PackedLinears | None, fn, *a):
        """fn(*a), on the packed weights when `packs` is given (generation's path in the trainer)."""
        with packs.serving() if packs is not None else contextlib.nullcontext():
            return fn(*a)

    trees, tokens = 8, 16
    lm_head = models[0].get_output_embeddings()
    head_bytes = lm_head.weight.numel() * lm_head.weight.element_size()
    out = {"host": host(), "weight_mb": round(weight_bytes / 1e6, 1), "lm_head_mb": round(head_bytes / 1e6, 1)}
    for kernel in ("torch", "packed"):  # torch's float32 matmul (MKL), then comlrl.policy.packed_linear's
        packs = [PackedLinears(m) if kernel == "packed" else None for m in models]
        torch.set_num_threads(1)
        lm_ms = served(packs[0], head_ms, lm_head)
        alone = {rows: served(packs[0], decode_ms, models[0], rows) for rows in (2, 4)}
        torch.set_num_threads(2)  # side_by_side: one thread each, both at once
        lanes = list(zip(packs, models, strict=True))
        both = {rows: max(side_by_side([partial(served, p, decode_ms, m, rows) for p, m in lanes])) for rows in (2, 4)}
        out[kernel] = {"lm_head_ms_batch4": round(lm_ms, 2),
                       "lm_head_gb_per_s": round(head_bytes / lm_ms / 1e6, 2),
                       "decode_step_ms_one_agent": {str(k): round(v, 1) for k, v in alone.items()},
                       "decode_step_ms_two_agents_at_once": {str(k): round(v, 1) for k, v in both.items()},
                       "script_decode_floor_s": round(trees * tokens * (both[2] + both[4]) / 1000, 1)}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "decode_floor.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
