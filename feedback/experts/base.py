"""`ExpertError` where comlrl/trainer.py looks for it; the client stack itself is `comlrl.llm`."""

from comlrl.llm import LLMError as ExpertError

__all__ = ["ExpertError"]
