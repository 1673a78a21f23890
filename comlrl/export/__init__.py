"""A run's outputs for other tools: training records from its trees, its agents as plain model folders."""
