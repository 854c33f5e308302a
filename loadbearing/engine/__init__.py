"""The generation engine: model loading, decoder layers, batched generation, fast kernels, vLLM."""
