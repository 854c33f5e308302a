"""Questions: the benchmark loaders (GSM8K, MMLU, BBH), the arith generator, and prompts."""
