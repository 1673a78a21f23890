"""One run: the training loop, what it is built from, evaluation, checkpoints, outputs and the final report."""
