"""The error every layer raises for a bad configuration value: one line naming the key.

It lives below everything (no imports), so the tasks, the feedback modes, the registries and the config
schema raise the same type without importing each other.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad config value; the message is one line naming the key."""


def not_allowed(key: str, value: object, allowed: str) -> ConfigError:
    """`config error: <key>=<value> is not allowed; expected <allowed>`."""
    return ConfigError(f"config error: {key}={value!r} is not allowed; expected {allowed}")


def require(ok: bool, key: str, value: object, allowed: str) -> None:
    """Raise `not_allowed(key, value, allowed)` unless `ok`."""
    if not ok:
        raise not_allowed(key, value, allowed)


class RunStopped(RuntimeError):
    """A part the run depends on failed mid-run (the rollout server died): the message names it in one line;
    the run guard adds where the run stopped and which checkpoint is intact."""
