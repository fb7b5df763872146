"""Evaluation: benchmarks, calibration, accuracy reports, validation against brute force, the demo."""
