"""Learning: the multi-turn rollout engine, GRPO on TRL, PPO, SFT warm-start and the tiny default model.

See docs/training.md.
"""
