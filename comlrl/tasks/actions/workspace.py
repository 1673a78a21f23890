"""A trajectory's scratch directory: paths are relative, `..`, absolute paths and symlinks are refused."""

from __future__ import annotations

import errno
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

from feedback.context import cap


class WorkspaceError(ValueError):
    """A path or write the workspace refuses; the message becomes the action's observation."""


def path_parts(rel: Any) -> list[str]:
    """The components of a relative workspace path; WorkspaceError for empty, absolute or `..` paths."""
    if not isinstance(rel, str) or not rel.strip():
        raise WorkspaceError("the path is empty")
    if "\x00" in rel or len(rel) > 200:
        raise WorkspaceError(f"invalid path {rel[:60]!r}")
    norm = rel.strip().replace("\\", "/")
    if norm.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", norm):
        raise WorkspaceError(f"{rel!r}: absolute paths are not allowed; use a path relative to the workspace")
    parts = [p for p in PurePosixPath(norm).parts if p not in ("", ".")]
    if ".." in parts:
        raise WorkspaceError(f"{rel!r}: '..' is not allowed; stay inside the workspace")
    if not parts:
        raise WorkspaceError(f"{rel!r} names the workspace itself, not a file")
    return parts


class Workspace:
    """One trajectory's scratch directory. Every path is relative and stays inside `root`."""

    def __init__(self, root: str | os.PathLike[str], *, max_file_chars: int = 20_000, max_files: int = 64,
                 max_total_chars: int = 400_000) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.max_file_chars = max_file_chars
        self.max_files = max_files
        self.max_total_chars = max_total_chars

    def resolve(self, rel: str) -> Path:
        """The absolute path of a workspace path; WorkspaceError for anything that could leave the root."""
        parts = path_parts(rel)
        target = self.root.joinpath(*parts)
        probe = self.root
        for part in parts:
            probe = probe / part
            if probe.is_symlink():
                raise WorkspaceError(f"{rel!r}: symbolic links are not allowed in the workspace")
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(target)
        if real != real_root and not real.startswith(real_root + os.sep):
            raise WorkspaceError(f"{rel!r} escapes the workspace")
        return target

    def exists(self, rel: str) -> bool:
        try:
            return self.resolve(rel).is_file()
        except WorkspaceError:
            return False

    def read(self, rel: str, limit: int = 4000) -> str:
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a directory; files in it: {', '.join(self.list(rel)) or 'none'}")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise WorkspaceError(f"{rel} does not exist") from None
        except OSError as exc:
            raise WorkspaceError(f"{rel}: cannot read ({errno.errorcode.get(exc.errno or 0, exc)})") from None
        with os.fdopen(fd, "rb") as f:
            data = f.read(self.max_file_chars * 4 + 4)
        return cap(data.decode("utf-8", errors="replace"), limit)

    def write(self, rel: str, content: str) -> None:
        if not isinstance(content, str):
            raise WorkspaceError("the content must be text")
        if len(content) > self.max_file_chars:
            raise WorkspaceError(f"{rel}: {len(content)} characters is above the limit of {self.max_file_chars}")
        path = self.resolve(rel)
        if path.is_dir():
            raise WorkspaceError(f"{rel!r} is a directory")
        files = self.list()
        if not path.is_file():
            if len(files) >= self.max_files:
                raise WorkspaceError(f"the workspace already holds {len(files)} files (the limit)")
        total = sum((self.root / f).stat().st_size for f in files if (self.root / f) != path) + len(content)
        if total > self.max_total_chars:
            raise WorkspaceError(f"the workspace would hold {total} characters (limit {self.max_total_chars})")
        parent = path.parent
        for anc in [parent, *parent.parents]:
            if anc == self.root or self.root not in anc.parents:
                break
            if anc.exists() and not anc.is_dir():
                raise WorkspaceError(f"{rel!r}: {anc.relative_to(self.root)} is a file, not a directory")
        parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(content)

    def list(self, under: str = "") -> list[str]:
        """Relative paths of the regular files (symlinks are never followed nor listed)."""
        base = self.resolve(under) if under else self.root
        out = []
        for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                p = Path(dirpath) / name
                if p.is_file() and not p.is_symlink():
                    out.append(p.relative_to(self.root).as_posix())
        return out

    def snapshot(self) -> dict[str, str]:
        """Every file's text (for run_python, checks and the judge)."""
        return {rel: (self.root / rel).read_text(encoding="utf-8", errors="replace") for rel in self.list()}

    def copy_to(self, dst: str | os.PathLike[str]) -> Workspace:
        shutil.copytree(self.root, dst, symlinks=True, dirs_exist_ok=False)
        return Workspace(dst, max_file_chars=self.max_file_chars, max_files=self.max_files,
                         max_total_chars=self.max_total_chars)
