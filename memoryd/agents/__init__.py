"""Per-agent memory settings (seed 000 §8): stored per agent, defaults from Settings.

May import: models, settings.
"""
