"""Execution engine: the checked program translated to Python once at load time."""
