"""Model math, written once and compiled for every engine (see ``ssm/`` for state-space models)."""
