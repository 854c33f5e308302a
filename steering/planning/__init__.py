"""Planning a steering verdict: power, minimum detectable effect and the sample it needs."""
