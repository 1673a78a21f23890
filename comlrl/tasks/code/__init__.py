"""The code tasks' own logic that is not execution: the levelled reward (`reward.py`)."""
