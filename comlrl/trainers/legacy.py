"""Field names of CoMLRL's releases before 1.4 that 1.4.3's configs no longer have, accepted so that a script
written for them builds its config unchanged (issue 69; docs/comlrl-compat.md, "Names before 1.4").

A config class lists `renamed_fields` (old name -> 1.4.3's name: the value goes to the new field) and
`retired_fields` (old name -> its old default: the value is kept in the instance's `legacy_fields` for the
mapping, which honours, warns about or refuses it). Giving an old name with its new one is one `ConfigError`
line. The metaclass does this before the dataclass's own `__init__`, so `dataclasses.fields` stays 1.4.3's list.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from comlrl.errors import ConfigError

# MAGRPOConfig before 1.4 (1.2.x-1.3.2 subclassed transformers' TrainingArguments; 1.3.3 was its own dataclass)
MAGRPO_RENAMED = {"learning_rate": "agent_learning_rate", "termination_threshold": "early_termination_threshold"}
MAGRPO_RETIRED: dict[str, Any] = {
    "weight_decay": 0.0,  # AdamW's, 1.3.2-1.3.3: magrpo.weight_decay here
    "per_device_train_batch_size": 1,  # 1.3.2 required 1
    "save_steps": 200,  # declared by 1.3.2, read by nothing
    "dataloader_drop_last": False,  # 1.3.2-1.3.3's DataLoader options
    "dataloader_num_workers": 0,
    "output_dir": None,  # TrainingArguments' (1.3.2 and before), read by nothing: save_model takes its own folder
}


class LegacyFields(type):
    """Metaclass of the config dataclasses: old keyword names are translated (renamed) or set aside (retired)
    before the dataclass's `__init__` runs; see the module docstring."""

    # a class that lists none of either kind reads these (a class's own attribute wins over its metaclass's)
    renamed_fields: Mapping[str, str] = MappingProxyType({})
    retired_fields: Mapping[str, Any] = MappingProxyType({})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        renamed, retired = cls.renamed_fields, cls.retired_fields
        legacy: dict[str, Any] = {}
        for old in [k for k in kwargs if k in renamed or k in retired]:
            value = kwargs.pop(old)
            if old in retired:
                legacy[old] = value
                continue
            new = renamed[old]
            if new in kwargs:
                raise ConfigError(f"config error: {cls.__name__}.{old}: the name before 1.4 of {new}; pass one of "
                                  "them, not both")
            kwargs[new] = value
        obj = super().__call__(*args, **kwargs)
        obj.legacy_fields = legacy
        return obj
