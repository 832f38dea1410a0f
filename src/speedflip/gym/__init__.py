"""Gymnasium environments: PPO, recurrent PPO and DQN training, evaluation and ``best/`` checkpoints."""
