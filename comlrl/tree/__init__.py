"""The turn tree: nodes with per-path state, the level-synchronous rollout, the Task/Transition/Reward
contracts and the trees.jsonl record."""
