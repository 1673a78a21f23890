"""`Refused`: a request the rollout server answers with 409. Its own module so both of the server's fronts
(`comlrl.engines.rollout_server`, which builds the OpenAI one, and `comlrl.engines.openai_front`) raise and
catch it without importing each other."""

from __future__ import annotations


class Refused(Exception):
    """A request the server answers with 409: the message says why (stale version, version never pushed)."""
