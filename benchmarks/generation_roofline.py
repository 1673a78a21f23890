"""Generation efficiency: `AgentPolicies.generate` tokens/s against the model's own decode roofline.

The roofline is measured in the same process on the same weights, batch and lengths: a bare batched
forward loop with a KV cache (one prefill, then L-1 single-token decode steps, greedy argmax: no
sampling, no logits processors, no stopping checks, no LoRA). The workload is one level of an
align_T2_G4 rollout: R requests (agents x nodes, the code_collab turn-1 prompts of R/2 problems), G samples
each, so B = R x G rows decode exactly L tokens each (EOS is disabled for the measurement).

Variants, alternating in every round (the order rotates):
  ours           AgentPolicies.generate(requests, G): LoRA adapters with per-row routing, sampling at the
                 training temperature, each prompt prefilled once and its KV cache copied to its G rows
  ours_unshared  the same call with every request repeated G times and one sample each: each row prefills
                 its own copy of the prompt (what generate did before the prefill was shared)
  roofline       bare loop on the plain base model, shared prefill (R rows), then B-row decode
  roofline_unshared  bare loop with a B-row prefill (the prefill-sharing potential without any framework)
The headline is median(ours / roofline) over rounds in tokens per CPU-second of this process: with one
torch thread that is the wall-clock rate on an idle core, and it is stable on a shared machine where the
wall-clock rate swings with the load (wall-clock figures are reported next to it).
Once, after the rounds, the gap is attributed: the bare loop with LoRA routing, and the cost of HF's
sampling (temperature, top-k 50, softmax, multinomial) on [B, vocab] logits; and the bare decode rate is
measured at batch sizes 1..128 (what batching can buy on this machine: the ceiling of any batching gain).

    python benchmarks/generation_roofline.py [--rounds 3] [--requests 8] [--samples 4] [--length 32]
    python benchmarks/generation_roofline.py --quick     # tiny-random smoke run

Writes benchmarks/results/generation_roofline.json (`--quick`: generation_roofline_quick.json).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command, machine, median, rss_mb, setup, write  # noqa: E402

VARIANTS = ("ours", "roofline", "ours_unshared", "roofline_unshared")


def left_pad(prompts: list[list[int]], pad: int):
    import torch

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    return ids, mask


def bare_loop(model, ids, mask, repeat: int, length: int, shared: bool, route=None) -> dict:
    """Prefill + (length - 1) single-token decode steps with a DynamicCache, greedy; returns timings."""
    import torch
    from transformers import DynamicCache

    route = route or (lambda rows: contextlib.nullcontext())
    t0, c0 = time.perf_counter(), time.process_time()
    with torch.no_grad():
        if not shared:
            ids, mask = ids.repeat_interleave(repeat, 0), mask.repeat_interleave(repeat, 0)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=model.config)
        with route(ids.shape[0]):
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache,
                        use_cache=True, logits_to_keep=1)
        logits = out.logits[:, -1]
        if shared:
            cache.batch_repeat_interleave(repeat)
            logits, mask = logits.repeat_interleave(repeat, 0), mask.repeat_interleave(repeat, 0)
        nxt = logits.argmax(-1)
        t_pre = time.perf_counter() - t0
        last = pos[:, -1].repeat_interleave(repeat, 0) if shared else pos[:, -1]
        rows = nxt.shape[0]
        ones = torch.ones((rows, 1), dtype=mask.dtype)
        tokens = [nxt]
        for _ in range(length - 1):
            mask = torch.cat([mask, ones], dim=1)
            last = last + 1
            with route(rows):
                out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last[:, None],
                            past_key_values=cache, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1)
            tokens.append(nxt)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": wall, "cpu_seconds": cpu, "prefill_seconds": t_pre, "tokens": rows * length,
            "first_row": torch.stack(tokens, 1)[0].tolist()}


def run_ours(pol, requests, samples: int, shared: bool) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    if shared:
        out = pol.generate(requests, samples)
    else:
        out = pol.generate([r for r in requests for _ in range(samples)], 1)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": wall, "cpu_seconds": cpu, "tokens": sum(len(s.completion_ids) for row in out for s in row)}


def decode_scaling(model, ids, mask, batches: list[int], steps: int) -> dict[int, float]:
    """Bare-loop decode tokens per CPU-second at several batch sizes (one prompt, its cache copied B times)."""
    import torch
    from transformers import DynamicCache

    rates = {}
    with torch.no_grad():
        for b in batches:
            cache = DynamicCache(config=model.config)
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            out = model(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True,
                        logits_to_keep=1)
            cache.batch_repeat_interleave(b)
            m, last = mask.repeat_interleave(b, 0), pos[:, -1].repeat_interleave(b, 0)
            nxt = out.logits[:, -1].argmax(-1).repeat_interleave(b, 0)
            c0 = time.process_time()
            for _ in range(steps):
                m = torch.cat([m, torch.ones((b, 1), dtype=m.dtype)], dim=1)
                last = last + 1
                out = model(input_ids=nxt[:, None], attention_mask=m, position_ids=last[:, None],
                            past_key_values=cache, use_cache=True)
                nxt = out.logits[:, -1].argmax(-1)
            rates[b] = round(b * steps / (time.process_time() - c0), 2)
    return rates


def sampling_cost(rows: int, vocab: int, length: int, temperature: float) -> float:
    """Seconds HF's sampling path spends on [rows, vocab] logits over `length` steps (warpers + multinomial)."""
    import torch
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper

    warpers = [TemperatureLogitsWarper(temperature), TopKLogitsWarper(50)]
    scores = torch.randn(rows, vocab)
    ids = torch.zeros((rows, 1), dtype=torch.long)
    t0 = time.perf_counter()
    for _ in range(length):
        s = scores
        for w in warpers:
            s = w(ids, s)
        torch.multinomial(torch.softmax(s, -1), 1)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=8, help="R: prompts per call (2 agents x R/2 problems)")
    ap.add_argument("--samples", type=int, default=4, help="G: samples per prompt")
    ap.add_argument("--length", type=int, default=32, help="L: new tokens per row (EOS disabled)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="tiny-random, 2 rounds, short")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.model, args.rounds, args.length, args.requests = "tiny-random", 2, min(args.length, 8), 4
    setup(args.threads)
    import torch

    from comlrl.config.schema import load_config
    from comlrl.models import load_model
    from comlrl.policy import AgentPolicies, agent_name
    from comlrl.tasks import build_task
    from comlrl.tasks.datasets import load_dataset

    t_start = time.perf_counter()
    info = machine(args.threads)
    cfg = load_config(None, [f"model.name={args.model}", f"model.max_new_tokens={args.length}"])
    pol = AgentPolicies(cfg.model, cfg.agents, 2)
    base = load_model(pol.paths[0], cfg.model.dtype).eval()  # plain weights, no peft wrappers
    task = build_task("code_collab", None)
    problems, _ = load_dataset(cfg.dataset)
    requests = [(a, task.initial_messages(problems[i])[a]) for i in range(args.requests // 2) for a in (0, 1)]
    prompts = [pol.prompt_ids(a, m)[0] for a, m in requests]
    tok = pol.tokenizers[0]
    ids, mask = left_pad(prompts, tok.pad_token_id)
    rows, G, L = len(requests) * args.samples, args.samples, args.length
    vocab = base.config.vocab_size
    print(f"# {args.model}: R={len(requests)} prompts of {min(map(len, prompts))}-{max(map(len, prompts))} tokens "
          f"(width {ids.shape[1]}), G={G}, B={rows} rows x L={L} tokens, {args.threads} thread(s), "
          f"load {os.getloadavg()[0]:.2f}", flush=True)

    # correctness of the shared prefill on this model: greedy tokens equal the unshared path
    few = requests[:2]
    g_shared = [[s.completion_ids for s in row] for row in pol.generate(few, 2, greedy=True)]
    g_plain = pol.generate([r for r in few for _ in range(2)], 1, greedy=True)
    greedy_equal = g_shared == [[g_plain[2 * i][0].completion_ids, g_plain[2 * i + 1][0].completion_ids]
                                for i in range(len(few))]
    print(f"# greedy tokens with the shared prefill equal the unshared ones: {greedy_equal}", flush=True)

    pol.eos_ids = [[len(tok) - 1]] * pol.num_agents  # a token the model practically never emits: rows run L steps
    pol.generate(requests[:1], 1)  # warm-up
    bare_loop(base, ids[:1], mask[:1], 1, 2, shared=True)

    def run(variant: str) -> dict:
        torch.manual_seed(0)
        if variant.startswith("ours"):
            return run_ours(pol, requests, G, shared=variant == "ours")
        return bare_loop(base, ids, mask, G, L, shared=variant == "roofline")

    rec: dict = {v: [] for v in VARIANTS}
    fractions, cpu_fractions, share_gain, cpu_share_gain = [], [], [], []
    for r in range(args.rounds):
        order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
        res = {}
        for v in order:
            res[v] = run(v)
            res[v]["tokens_per_s"] = res[v]["tokens"] / res[v]["seconds"]
            res[v]["tokens_per_cpu_s"] = res[v]["tokens"] / res[v]["cpu_seconds"]
            rec[v].append({k: (round(x, 3) if isinstance(x, float) else x) for k, x in res[v].items()
                           if k != "first_row"})
        fractions.append(round(res["ours"]["tokens_per_s"] / res["roofline"]["tokens_per_s"], 3))
        cpu_fractions.append(round(res["ours"]["tokens_per_cpu_s"] / res["roofline"]["tokens_per_cpu_s"], 3))
        share_gain.append(round(res["ours"]["tokens_per_s"] / res["ours_unshared"]["tokens_per_s"], 3))
        cpu_share_gain.append(round(res["ours"]["tokens_per_cpu_s"] / res["ours_unshared"]["tokens_per_cpu_s"], 3))
        print(f"# round {r + 1}/{args.rounds}: "
              + ", ".join(f"{v} {res[v]['tokens_per_cpu_s']:.1f} tok/cpu-s ({res[v]['tokens_per_s']:.1f} tok/s)"
                          for v in VARIANTS)
              + f"; ours/roofline {cpu_fractions[-1]:.2f} (wall {fractions[-1]:.2f}), load {os.getloadavg()[0]:.2f}",
              flush=True)

    # attribution (once): the bare loop with LoRA routing, and HF's sampling on [B, vocab] logits
    peft_model = pol.module.base

    def route(n_rows: int):
        per = n_rows // len(requests)
        return pol.module.routed([agent_name(a) for a, _ in requests for _ in range(per)])

    lora_loop = bare_loop(peft_model, ids, mask, G, L, shared=True, route=route)
    lora_loop["tokens_per_s"] = lora_loop["tokens"] / lora_loop["seconds"]
    lora_loop["tokens_per_cpu_s"] = lora_loop["tokens"] / lora_loop["cpu_seconds"]
    sample_s = sampling_cost(rows, vocab, L, cfg.model.temperature)
    scaling = decode_scaling(base, ids[:1], mask[:1], [1, 4, 8, 32, 128] if not args.quick else [1, 4], 6)

    med = {v: median([x["tokens_per_s"] for x in rec[v]]) for v in VARIANTS}
    med_cpu = {v: median([x["tokens_per_cpu_s"] for x in rec[v]]) for v in VARIANTS}
    pre = {v: median([x["prefill_seconds"] for x in rec[v]]) for v in ("roofline", "roofline_unshared")}
    print(f"\n{'variant':<18} {'tok/cpu-s':>10} {'tok/s (wall)':>12} {'of roofline':>12}  notes")
    notes = {"ours": "AgentPolicies.generate, shared prefill, sampling, LoRA routing",
             "ours_unshared": "same, each row prefills its own prompt copy",
             "roofline": f"bare KV-cache loop, greedy, plain base; prefill {pre['roofline']:.1f}s",
             "roofline_unshared": f"bare loop, B-row prefill {pre['roofline_unshared']:.1f}s"}
    for v in VARIANTS:
        print(f"{v:<18} {med_cpu[v]:>10.1f} {med[v]:>12.1f} {med_cpu[v] / med_cpu['roofline']:>11.0%}  {notes[v]}")
    b = med_cpu["roofline"]
    print(f"{'bare loop + LoRA':<18} {lora_loop['tokens_per_cpu_s']:>10.1f} {lora_loop['tokens_per_s']:>12.1f} "
          f"{lora_loop['tokens_per_cpu_s'] / b:>11.0%}  once, after the rounds")
    print("bare decode tokens per CPU-second by batch size (what batching can buy on this CPU): "
          + ", ".join(f"B={k}: {v:.0f}" for k, v in scaling.items()))
    print(f"sampling (top-k 50 + softmax + multinomial on [{rows}, {vocab}]) x {L} steps: {sample_s:.2f}s "
          f"= {sample_s / (rows * L / b):.0%} of the roofline's CPU time for the same tokens")
    out = {
        "command": command("generation_roofline.py"), "quick": args.quick, "model": args.model,
        "machine": info, "rounds": args.rounds, "requests": len(requests), "samples": G, "rows": rows,
        "length": L, "prompt_tokens": [len(p) for p in prompts], "prompt_width": int(ids.shape[1]),
        "greedy_shared_equals_unshared": greedy_equal, "variants": rec,
        "median_tokens_per_s": med, "median_tokens_per_cpu_s": med_cpu,
        "fractions": fractions, "cpu_fractions": cpu_fractions, "median_fraction": median(fractions),
        "median_cpu_fraction": median(cpu_fractions),
        "prefill_sharing_gain": share_gain, "median_prefill_sharing_gain": median(share_gain),
        "cpu_prefill_sharing_gain": cpu_share_gain, "median_cpu_prefill_sharing_gain": median(cpu_share_gain),
        "roofline_sharing_potential": round(med_cpu["roofline"] / med_cpu["roofline_unshared"], 3),
        "attribution": {"bare_loop_lora_tokens_per_s": round(lora_loop["tokens_per_s"], 2),
                        "bare_loop_lora_tokens_per_cpu_s": round(lora_loop["tokens_per_cpu_s"], 2),
                        "sampling_seconds": round(sample_s, 3),
                        "decode_tokens_per_cpu_s_by_batch": scaling,
                        "roofline_cpu_seconds_for_same_tokens": round(rows * L / b, 3)},
        "rss_mb": round(rss_mb()), "total_s": round(time.perf_counter() - t_start, 1),
        "total_cpu_s": round(time.process_time(), 1),
    }
    write("generation_roofline_quick" if args.quick and not args.out else "generation_roofline", out, args.out)
    print(f"ours vs decode roofline at B={rows}, L={L}: {out['median_cpu_fraction']:.0%} of the roofline's tokens "
          f"per CPU-second (median of {args.rounds} rounds; wall clock {out['median_fraction']:.0%}); shared prefill "
          f"{out['median_cpu_prefill_sharing_gain']:.2f}x the unshared generate; target >= 50%")


if __name__ == "__main__":
    main()
