"""The names of CoMLRL 1.4.3's `comlrl.utils` that scripts written for it import, behaving as there: the reward
processors (`RewardProcessors`) and a reward function's declared range (`set_reward_range`,
`resolve_reward_range`). The rest of 1.4.3's `comlrl.utils` is its trainers' own machinery and is not provided
(docs/comlrl-compat.md, the name table). Pure: imports nothing of comlrl, so any layer may use it."""

from comlrl.utils.reward_processor import RewardProcessors
from comlrl.utils.reward_utils import resolve_reward_range, set_reward_range

__all__ = ["RewardProcessors", "resolve_reward_range", "set_reward_range"]
