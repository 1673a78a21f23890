"""The built-in problem sets (easy.jsonl) and action tasks (action_tasks.jsonl), shipped as package data."""
