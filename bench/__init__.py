"""Simulator, evaluation harness and benchmarks."""
