"""Micro-batches of an update (`comlrl.learn.update.micro_batches`), without models: within the token slots of
`magrpo.loss.micro_batch_size` of the step's longest samples, as the packed layout counts them (a prompt's start
laid once for the units that share it), in order, every unit once."""

from __future__ import annotations

import random

from comlrl.learn.units import Unit
from comlrl.learn.update import micro_batches
from comlrl.policy.packing import packed_area
from comlrl.tree.nodes import Sample


def area(samples: list[Sample]) -> int:
    return packed_area([s.agent for s in samples], [s.prompt_ids for s in samples],
                       [s.completion_ids for s in samples])


def group(prompt: tuple[int, ...], completions: int, length: int = 10, agent: int = 0) -> Unit:
    """A node's siblings: `completions` samples of one prompt."""
    return Unit(tuple(Sample(agent, prompt, tuple(range(100, 100 + length)), "", True) for _ in range(completions)))


def sizes(batches: list[list[Unit]]) -> list[int]:
    return [sum(len(u.samples) for u in b) for b in batches]


def test_samples_that_share_nothing_make_micro_batches_of_size_completions() -> None:
    units = [group((k, 1, 2, 3), 1) for k in range(10)]  # distinct prompts, equal lengths
    assert sizes(micro_batches(units, 4, area)) == [4, 4, 2]
    assert sizes(micro_batches(units, 1, area)) == [1] * 10


def test_siblings_lay_their_prompt_once_so_more_of_them_fit() -> None:
    prompt = tuple(range(50))
    units = [group((k, *prompt), 2) for k in range(5)]  # 51 + 2 x 10 = 71 slots a group; bound 4 x 61 = 244
    assert sizes(micro_batches(units, 4, area)) == [6, 4]  # 3 rows x 71 = 213 <= 244; a fourth: 284
    assert sizes(micro_batches(units, 4)) == [4, 4, 2]  # ranks in lock step: completions counted


def test_a_later_turns_nodes_share_the_first_turns_start_in_one_micro_batch() -> None:
    """The CoMLRL-style script's agent at a step: turn 1's group (a 50-token prompt) and turn 2's two nodes (77
    tokens, the first 49 the same), G=2, 16 tokens each: one row of 202 slots within 4 x 93."""
    first = tuple(range(50))
    turn2 = [first[:49] + tuple(range(1000 + 28 * k, 1028 + 28 * k)) for k in range(2)]
    units = [group(first, 2, 16), group(turn2[0], 2, 16), group(turn2[1], 2, 16)]
    assert area([s for u in units for s in u.samples]) == 49 + (1 + 32) + 2 * (28 + 32)
    assert sizes(micro_batches(units, 4, area)) == [6]
    assert sizes(micro_batches(units, 2, area)) == [4, 2]  # 142 slots within 2 x 93; all three: 202
    assert sizes(micro_batches(units, 1, area)) == [2, 2, 2]


def test_a_unit_past_the_bound_gets_a_micro_batch_of_its_own() -> None:
    units = [group((1,), 1, 5), group((2,), 8, 5), group((3,), 1, 5)]
    assert sizes(micro_batches(units, 1, area)) == [1, 8, 1]


def test_every_unit_once_in_order_and_each_shared_micro_batch_within_the_bound() -> None:
    rng = random.Random(0)
    for _ in range(200):
        units = [group(tuple(rng.choices(range(3), k=rng.randint(1, 12))), rng.randint(1, 4), rng.randint(0, 9),
                       agent=rng.randint(0, 1)) for _ in range(rng.randint(1, 12))]
        size = rng.randint(1, 6)
        batches = micro_batches(units, size, area)
        assert [u for b in batches for u in b] == units
        bound = size * max(len(s.prompt_ids) + len(s.completion_ids) for u in units for s in u.samples)
        assert all(area([s for u in b for s in u.samples]) <= bound for b in batches if len(b) > 1)
