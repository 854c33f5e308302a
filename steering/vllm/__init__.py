"""Steering and ablation inside vLLM's workers (per-request hooks), and tracing differences to HF."""
