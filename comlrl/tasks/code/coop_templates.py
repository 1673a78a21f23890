"""The templates of the cooperative problems (`coop_problems`): helper rules and main combiners.

A `Rule` is what only the helper agent is told: `aux`'s docstring states a secret (a constant, a letter, a
lookup table, a conversion factor) and its body implements it. A `Combiner` is what the main agent is told:
the entry point calls `aux` on its inputs and combines the results (a sum, a count, a filter...), knowing
what `aux` returns but not how. Their types must fit (`Combiner.fits`), so every pair is a well-typed
problem. Sources are format strings over the drawn constants; keys starting with `_` are display words
(names, units) that change no result, the others are the secret (`perturb` changes them all).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Params = dict[str, Any]
Item = Callable[[], Any]  # draws one input of aux's type

WORDS = ("apple", "river", "stone", "cloud", "tiger", "lemon", "bread", "chair", "dream", "eagle", "flame",
         "grass", "house", "jelly", "kite", "light", "music", "night", "ocean", "paper", "queen", "robot",
         "sugar", "train", "uncle", "voice", "water", "zebra", "bird", "cat", "dog", "fish", "moon", "sun",
         "star", "tree", "rain", "snow", "wind", "road", "ship", "book", "milk", "salt", "gold", "lamp")
THEMES = {"price": ("apple", "pear", "fig", "plum", "kiwi", "lime", "grape", "melon", "peach", "mango"),
          "speed": ("cat", "dog", "owl", "fox", "bee", "ant", "cow", "pig", "hen", "yak"),
          "heat": ("red", "blue", "green", "pink", "gray", "gold", "teal", "navy", "lime", "rust")}
UNITS = (("glorp", "blip"), ("zorb", "quib"), ("mip", "dex"), ("flon", "trak"), ("vek", "sopa"))
INNER_LETTERS = "aeiorstnl"  # letters many WORDS contain
FIRST_LETTERS = "bcdglmrst"  # letters at least three WORDS start with
LAST_LETTERS = "deklnrt"  # letters at least three WORDS end with


@dataclass(frozen=True)
class Rule:
    """aux: `arg` -> `out`; `doc`, `body` and `returns` are format strings over the drawn params."""

    name: str
    arg: str  # "int" | "str"
    out: str  # "int" | "bool"
    monotone: bool  # a larger input (or longer word) never scores lower: `best` cannot show the secret
    draw: Callable[[random.Random], Params]
    doc: str  # the helper's docstring: the rule, with its secret
    body: str  # aux's return expression
    returns: str  # what aux returns, as the main agent is told it (no secret)
    sample: Callable[[random.Random, Params], Any]  # one input that makes the secret matter often

    @property
    def var(self) -> str:
        return "x" if self.arg == "int" else "word"


def perturb(params: Params) -> Params:
    """The same rule with every secret changed: ints + 1, letters shifted by one, a table's values moved
    one word on (a uniform shift would keep their order, which `best` alone reads). What a teammate who
    guessed the rule's shape but not its constants would compute."""
    def change(v: Any) -> Any:
        if isinstance(v, dict):
            values = list(v.values())
            return dict(zip(v, values[1:] + values[:1], strict=True))
        if isinstance(v, str):
            return chr((ord(v) - ord("a") + 1) % 26 + ord("a"))
        return v + 1
    return {k: (v if k.startswith("_") else change(v)) for k, v in params.items()}


def _pick(r: random.Random, pool: tuple[str, ...], want: Callable[[str], bool]) -> str:
    """A word from `pool`: half the time one for which `want` holds (when there is one)."""
    hits = [w for w in pool if want(w)]
    return r.choice(hits) if hits and r.random() < 0.5 else r.choice(pool)


def _lookup(r: random.Random) -> Params:
    name = r.choice(tuple(THEMES))
    table = dict(zip(r.sample(THEMES[name], 3), r.sample(range(2, 10), 3), strict=True))
    return {"table": table, "default": 0, "_name": name, "_tag": name,
            "_table": ", ".join(f"{w} is {v}" for w, v in table.items())}


def _convert(r: random.Random) -> Params:
    src, dst = r.choice(UNITS)
    return {"k": r.randint(2, 12), "_src": src, "_dst": dst, "_name": f"value in {dst}s", "_tag": f"{dst}s"}


def _named(names: tuple[str, ...], **draws: Callable[[random.Random], Any]) -> Callable[[random.Random], Params]:
    def draw(r: random.Random) -> Params:
        params = {k: d(r) for k, d in draws.items()}
        name = r.choice(names)
        return {**params, "_name": name, "_tag": name}
    return draw


def _threshold_sample(r: random.Random, p: Params) -> int:
    t = p["t"]
    return r.choice((t, t + 1)) if r.random() < 0.3 else r.randint(max(0, t - 8), t + 8)


def _modpred_draw(r: random.Random) -> Params:
    k = r.randint(3, 7)
    name = r.choice(("lucky", "special", "magic"))
    return {"k": k, "r": r.randint(0, k - 1), "_name": name, "_tag": name}


RULES: tuple[Rule, ...] = (
    Rule("affine", "int", "int", True, _named(("score", "rating", "grade"), a=lambda r: r.randint(2, 9),
                                              b=lambda r: r.randint(2, 19)),
         "Return the {_name} of x: x * {a} + {b}.", "x * {a} + {b}", "the {_name} of one number",
         lambda r, p: r.randint(0, 30)),
    Rule("convert", "int", "int", True, _convert,
         "Convert x {_src}s to {_dst}s: one {_src} is {k} {_dst}s.", "x * {k}", "the value in {_dst}s of x {_src}s",
         lambda r, p: r.randint(0, 30)),
    Rule("modscore", "int", "int", False, _named(("spin", "residue", "tail"), m=lambda r: r.randint(3, 9)),
         "Return the {_name} of x: x % {m}.", "x % {m}", "the {_name} of one number",
         lambda r, p: r.randint(0, 40)),
    Rule("modpred", "int", "bool", False, _modpred_draw,
         "Return whether x is {_name}: x % {k} == {r}.", "x % {k} == {r}", "whether one number is {_name}",
         lambda r, p: r.randint(0, 40)),
    Rule("threshold", "int", "bool", True, _named(("big", "large", "heavy"), t=lambda r: r.randint(10, 29)),
         "Return whether x is {_name}: x > {t}.", "x > {t}", "whether one number is {_name}", _threshold_sample),
    Rule("letters", "str", "int", False, _named(("weight", "charm", "score"), c=lambda r: r.choice(INNER_LETTERS)),
         "Return the {_name} of word: how many times the letter {c!r} appears in it.", "word.count({c!r})",
         "the {_name} of one word", lambda r, p: _pick(r, WORDS, lambda w: p["c"] in w)),
    Rule("lookup", "str", "int", False, _lookup,
         "Return the {_name} of word: {_table}; any other word is {default}.", "{table!r}.get(word, {default})",
         "the {_name} of one word", lambda r, p: _pick(r, THEMES[p["_name"]], lambda w: w in p["table"])),
    Rule("length", "str", "int", True, _named(("size", "span", "bulk"), k=lambda r: r.randint(2, 9)),
         "Return the {_name} of word: len(word) * {k}.", "len(word) * {k}", "the {_name} of one word",
         lambda r, p: r.choice(WORDS)),
    Rule("first", "str", "bool", False, _named(("chosen", "picked", "marked"), c=lambda r: r.choice(FIRST_LETTERS)),
         "Return whether word is {_name}: it starts with the letter {c!r}.", "word.startswith({c!r})",
         "whether one word is {_name}", lambda r, p: _pick(r, WORDS, lambda w: w.startswith(p["c"]))),
    Rule("last", "str", "bool", False, _named(("tagged", "flagged", "signed"), c=lambda r: r.choice(LAST_LETTERS)),
         "Return whether word is {_name}: it ends with the letter {c!r}.", "word.endswith({c!r})",
         "whether one word is {_name}", lambda r, p: _pick(r, WORDS, lambda w: w.endswith(p["c"]))),
)


@dataclass(frozen=True)
class Combiner:
    """The entry point around `aux`; `entry`, `params`, `result`, `doc` and `body` are format strings over
    {tag} {name} (the rule's display words), {v} {vs} {t} {item} {items} (its input type)."""

    name: str
    fits: Callable[[Rule], bool]
    entry: str
    params: str
    result: str
    doc: str
    body: str  # the canonical solution, indented; never a bare `return aux(...)` (the reward's thin wrapper)
    cases: Callable[[random.Random, Item], list[tuple[Any, ...]]]  # the tests' arguments


def _list(r: random.Random, item: Item, lo: int = 2, hi: int = 5) -> list[Any]:
    return [item() for _ in range(r.randint(lo, hi))]


def _lists(empty: bool) -> Callable[[random.Random, Item], list[tuple[Any, ...]]]:
    """Five single-list cases; the first is the empty list when the combiner has an answer for it."""
    def cases(r: random.Random, item: Item) -> list[tuple[Any, ...]]:
        edge: list[tuple[Any, ...]] = [([],)] if empty else []
        return edge + [(_list(r, item),) for _ in range(5 - len(edge))]
    return cases


def _sentences(r: random.Random, item: Item) -> list[tuple[Any, ...]]:
    return [("",)] + [(" ".join(_list(r, item, 1, 5)),) for _ in range(4)]


def _number(rule: Rule) -> bool:
    return rule.out == "int"


def _predicate(rule: Rule) -> bool:
    return rule.out == "bool"


COMBINERS: tuple[Combiner, ...] = (
    Combiner("total", _number, "total_{tag}", "{vs}: list[{t}]", "int",
             "Return the total {name} of the {items} in {vs}: the sum of aux({v}) for each {v} (0 for an empty list).",
             "    return sum(aux({v}) for {v} in {vs})\n", _lists(True)),
    Combiner("each", _number, "each_{tag}", "{vs}: list[{t}]", "list[int]",
             "Return a list with aux({v}), the {name}, of each {v} in {vs}, in order.",
             "    return [aux({v}) for {v} in {vs}]\n", _lists(True)),
    Combiner("best", lambda r: _number(r) and not r.monotone, "best_by_{tag}", "{vs}: list[{t}]", "{t}",
             "Return the {v} in {vs} with the highest aux({v}), its {name} (the first one on a tie); "
             "{vs} is never empty.",
             "    return max({vs}, key=lambda {v}: aux({v}))\n", _lists(False)),
    Combiner("pair", _number, "pair_{tag}", "a: {t}, b: {t}", "int",
             "Return aux(a) + aux(b): the {name} of a plus the {name} of b.", "    return aux(a) + aux(b)\n",
             lambda r, item: [(item(), item()) for _ in range(5)]),
    Combiner("repeat", lambda r: r.arg == "int" and r.out == "int", "repeat_{tag}", "x: int, n: int", "int",
             "Return x after replacing it n times by aux(x), its {name} (x itself when n is 0).",
             "    for _ in range(n):\n        x = aux(x)\n    return x\n",
             lambda r, item: [(item(), 0)] + [(item(), r.randint(1, 3)) for _ in range(4)]),
    Combiner("count", _predicate, "count_{tag}", "{vs}: list[{t}]", "int",
             "Return how many {v} in {vs} are {name}, that is aux({v}) is True (0 for an empty list).",
             "    return sum(1 for {v} in {vs} if aux({v}))\n", _lists(True)),
    Combiner("keep", _predicate, "keep_{tag}", "{vs}: list[{t}]", "list[{t}]",
             "Return a list of each {v} in {vs} that is {name}, that is aux({v}) is True, in order.",
             "    return [{v} for {v} in {vs} if aux({v})]\n", _lists(True)),
    Combiner("drop", _predicate, "drop_{tag}", "{vs}: list[{t}]", "list[{t}]",
             "Return a list of each {v} in {vs} that is not {name}, that is aux({v}) is False, in order.",
             "    return [{v} for {v} in {vs} if not aux({v})]\n", _lists(True)),
    Combiner("sentence", lambda r: r.arg == "str" and r.out == "int", "sentence_{tag}", "sentence: str", "int",
             "Return the total {name} of the words in sentence: the sum of aux(word) for each word (split on spaces).",
             "    return sum(aux(word) for word in sentence.split())\n", _sentences),
    Combiner("sentence_count", lambda r: r.arg == "str" and r.out == "bool", "count_{tag}_words", "sentence: str",
             "int", "Return how many words in sentence are {name}, that is aux(word) is True (split on spaces).",
             "    return sum(1 for word in sentence.split() if aux(word))\n", _sentences),
)
