"""An on-disk cache of replies that parsed, so a rerun does not pay for the same prompt twice."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from comlrl.llm.completion import Completion

log = logging.getLogger("comlrl.llm")


class ResponseCache:
    """One JSON file per prompt under `root/ab/abcdef....json`, written atomically.

    Holds the reply text and token counts only: no key, no headers, no prompt.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return Completion(str(data["text"]), int(data.get("input_tokens", 0)), int(data.get("output_tokens", 0)))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, completion: Completion, model: str) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            payload = {"model": model, "text": completion.text, "input_tokens": completion.input_tokens,
                       "output_tokens": completion.output_tokens}
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(payload, f, ensure_ascii=False)
            os.replace(tmp, path)
        except OSError as exc:  # a read-only or full disk must not stop training
            log.warning("expert cache: could not write %s: %s", path, exc)
