"""Benchmarks of real-shape pairs on one GPU: speed, pass shapes and reads."""
