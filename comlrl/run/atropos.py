"""comlrl as an Atropos trainer: the run's steps train on the groups Atropos environments score.

With `rollout.atropos.url` set, the run grows no trees: rank 0 registers with Atropos's API server
(`run-api`: batch size, longest sequence, steps, checkpoint folder), then each step pulls one batch
(`GET /batch`), hands it to every rank, and trains on it with the run's update (`comlrl.learn.update`): each
group is a sibling group (`comlrl/run/atropos_groups.py`). After the optimizer step the rollout engine gets
the new weights as after any step (`rollout.engine=vllm_server`: the environments sample from that
server's OpenAI endpoints, so they sample the new policy). No atroposlib here: the API is plain HTTP.

Why not a task or an engine: a task makes prompts and scores the tree's joint actions, an engine samples
completions for the tree's prompts; an environment does both, for its own items, in its own process. So the
environments replace the tree (the rollout), as a pairs file does for offline DPO, and the run keeps
everything after it: the update, metrics, checkpoints, resume.

Several agents: Atropos groups are single-agent. With `magrpo.num_agents` N > 1 the i-th registered
environment (`env_id` i) trains agent i (start the environments in the agents' order, each sampling its
own agent's model name, `agentI`, from the rollout server); groups of other env_ids are skipped and counted.

Faults: the API server unreachable at the start is one line naming the URL (exit 2); it going away mid-run
stops the run with one line and the last checkpoint intact (`AtroposGone`, a `RunStopped`); an empty queue
is waited on with a progress line every `PROGRESS_S` seconds, up to `rollout.atropos.wait_timeout_s`; a
malformed group is skipped, counted (`atropos/malformed`) and warned about once per kind.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from comlrl.errors import ConfigError, RunStopped
from comlrl.run.atropos_groups import BatchUnits, Estimator, batch_units

if TYPE_CHECKING:
    from accelerate import Accelerator

    from comlrl.config.schema import RunConfig
    from comlrl.learn.learner import Learner
    from comlrl.learn.units import Algorithm
    from comlrl.policy import AgentPolicies

log = logging.getLogger("comlrl")

PROGRESS_S = 10.0  # a waiting line this often while the queue is empty
REQUEST_TIMEOUT_S = 30.0


class AtroposGone(RunStopped):
    """The API server stopped answering mid-run, or sent no batch within rollout.atropos.wait_timeout_s."""


def _unreachable(url: str, why: str) -> ConfigError:
    return ConfigError(f"error: the Atropos API server rollout.atropos.url={url} is not reachable ({why}); start it "
                       "first (run-api --port PORT) or correct the URL")


def _why(exc: Exception) -> str:
    """What went wrong with a request: a URLError's reason (the refused connection, the unknown host), else the
    error itself."""
    return str(exc.reason if isinstance(exc, urllib.error.URLError) else exc)


class AtroposClient:
    """The trainer's side of Atropos's API (atroposlib/api/trainer_interaction.md): register, pull batches."""

    def __init__(self, url: str, poll_s: float = 1.0, wait_timeout_s: float = 600.0) -> None:
        self.url = url.rstrip("/")
        self.poll_s, self.wait_timeout_s = poll_s, wait_timeout_s
        self.waited_s = 0.0  # seconds spent waiting on an empty queue, this step

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
            return json.loads(resp.read() or b"null")

    def ping(self) -> None:
        """GET / (run-api answers its name): a ConfigError naming the URL when nothing answers there."""
        try:
            self._call("/")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise _unreachable(self.url, _why(exc)) from None

    def register(self, cfg: RunConfig, start_step: int, checkpoint_dir: str) -> Any:
        """POST /register with the run's numbers; a ConfigError (exit 2) naming the URL when it is not there."""
        a, t = cfg.rollout.atropos, cfg.training
        body = {"wandb_group": "comlrl", "wandb_project": cfg.logging.wandb_project, "batch_size": a.batch_size,
                "max_token_len": a.max_token_len, "checkpoint_dir": checkpoint_dir,
                "save_checkpoint_interval": t.save_every, "starting_step": start_step, "num_steps": t.steps}
        try:
            return self._call("/register", body)
        except urllib.error.HTTPError as exc:
            raise _unreachable(self.url, f"HTTP {exc.code} on /register: is it Atropos's run-api?") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise _unreachable(self.url, _why(exc)) from None

    def next_batch(self, step: int) -> list[Any]:
        """The next batch of groups: polls GET /batch while the queue is empty (a line every PROGRESS_S),
        AtroposGone when the server stops answering or nothing comes within wait_timeout_s."""
        t0 = last_line = time.monotonic()
        while True:
            try:
                answer = self._call("/batch")
            except (urllib.error.URLError, OSError, ValueError) as exc:
                why = _why(exc)
                raise AtroposGone(f"the Atropos API server {self.url} stopped answering at step {step} ({why})"
                                  ) from None
            batch = answer.get("batch") if isinstance(answer, dict) else None
            if batch:
                self.waited_s = time.monotonic() - t0
                return list(batch)
            now = time.monotonic()
            if now - t0 > self.wait_timeout_s:
                raise AtroposGone(f"no batch from the Atropos API server {self.url} for step {step} within "
                                  f"rollout.atropos.wait_timeout_s={self.wait_timeout_s:g} s (are environments "
                                  "running and registered?)")
            if now - last_line >= PROGRESS_S:
                last_line = now
                log.info("step %d: waiting for a batch from %s (queue empty for %.0f s of %g)", step, self.url,
                         now - t0, self.wait_timeout_s)
            time.sleep(self.poll_s)


class AtroposSource:
    """The run's steps' data from Atropos: the client on rank 0, the batch shared with every rank."""

    def __init__(self, cfg: RunConfig, accelerator: Any) -> None:
        a = cfg.rollout.atropos
        assert a.url is not None
        self.cfg, self.acc = cfg, accelerator
        self.client = AtroposClient(a.url, a.poll_s, a.wait_timeout_s)
        n = cfg.magrpo.num_agents
        self.agents: dict[int, int] | int = 0 if n == 1 else {k: k for k in range(n)}
        adv = cfg.magrpo.advantage
        self.estimator = Estimator(adv.baseline, adv.scale, adv.eps)
        self.warned: set[str] = set()

    def check_reachable(self) -> None:
        """Rank 0 asks the API server's root before anything loads: a ConfigError naming the URL if absent."""
        if self.acc.is_main_process:
            self.client.ping()

    def register(self, start_step: int, checkpoint_dir: str) -> None:
        if self.acc.is_main_process:
            self.client.register(self.cfg, start_step, checkpoint_dir)
            log.info("registered with the Atropos API server %s (batches of %d sequences)", self.client.url,
                     self.cfg.rollout.atropos.batch_size)

    def batch(self, step: int) -> tuple[BatchUnits, float]:
        """This rank's share of the step's batch as units, and the seconds waited for it (rank 0's)."""
        payload = [self.client.next_batch(step + 1), self.client.waited_s] if self.acc.is_main_process else [None, 0]
        if self.acc.num_processes > 1:
            import torch.distributed as dist

            dist.broadcast_object_list(payload, src=0)
        groups, waited = payload
        mine = groups[self.acc.process_index::self.acc.num_processes]
        units = batch_units(mine, self.agents, self.estimator, self.cfg.rollout.atropos.max_token_len)
        for kind, count in units.malformed.items():
            if kind not in self.warned and self.acc.is_main_process:
                self.warned.add(kind)
                log.warning("skipped %d malformed Atropos group(s) at step %d: %s (said once per kind; "
                            "atropos/malformed in metrics.jsonl counts them)", count, step + 1, kind)
        return units, float(waited)


class AtroposRun(Protocol):
    """What an Atropos step reads of the run's parts (`comlrl.run.components.Components` is one; it builds
    the `AtroposSource`, so this module does not import it)."""

    cfg: RunConfig
    accelerator: Accelerator
    policies: AgentPolicies
    algorithm: Algorithm
    atropos: AtroposSource | None
    phase: Callable[[str], None]

    def trained(self) -> Learner: ...


def atropos_step(comp: AtroposRun, step: int) -> dict[str, float]:
    """One optimizer step on the next Atropos batch (this rank's share of it)."""
    from comlrl.learn.learner import sum_over_ranks
    from comlrl.learn.update import train_units

    assert comp.atropos is not None
    t0 = time.perf_counter()
    comp.phase("waiting for Atropos")
    got, waited = comp.atropos.batch(step)
    comp.phase("update")
    t_update = time.perf_counter()
    spare = got.units[0].samples[0] if got.units else _spare(comp)
    update = train_units(comp.trained(), comp.algorithm, comp.cfg, got.units, got.groups, spare)
    t_update = time.perf_counter() - t_update
    trained_tokens = float(sum(len(s.completion_ids) for u in got.units for s in u.samples))
    local = [float(got.groups.groups), float(got.groups.skipped), float(got.sequences), sum(got.scores),
             float(len(got.scores)), update.samples, trained_tokens, float(sum(got.malformed.values())),
             float(got.own_advantages), float(got.with_logprobs), update.loss, update.engine_abs_gap,
             update.engine_kl, update.engine_tokens]
    (groups, skipped, sequences, score_sum, scores, samples, tokens, malformed, own, with_lp, loss, gap, kl,
     gap_tokens) = sum_over_ranks(comp.accelerator, local)
    metrics: dict[str, float] = {
        "step": step + 1, "atropos/groups": int(groups), "adv_groups": int(groups), "adv_groups_skipped": int(skipped),
        "atropos/sequences": int(sequences), "reward_mean": score_sum / scores if scores else float("nan"),
        "samples": int(samples), "atropos/trained_tokens": int(tokens), "atropos/malformed": int(malformed),
        "atropos/own_advantages": int(own), "atropos/samples_with_logprobs": int(with_lp),
        "atropos/wait_seconds": waited, "loss": loss / comp.accelerator.num_processes,
        "grad_norm": update.grad_norm, "lr": update.lr, "weights_rank_spread": update.weights_rank_spread,
        "update_seconds": t_update}
    if gap_tokens:
        metrics.update({"rollout/logprob_abs_gap": gap / gap_tokens, "rollout/kl_engine_train": kl / gap_tokens})
    metrics["step_seconds"] = time.perf_counter() - t0
    return metrics


def _spare(comp: AtroposRun) -> Any:
    """A sample for the zero-weight micro-batches of a rank whose share of the batch is empty."""
    return comp.policies.sample_of(0, [{"role": "user", "content": "."}], ".")
