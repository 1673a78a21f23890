"""The learner and the algorithms: advantages, critic, preference pairs, losses and the update."""
