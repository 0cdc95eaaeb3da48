"""Hooks: their targets and encrypted secrets, and the delivery counts."""
