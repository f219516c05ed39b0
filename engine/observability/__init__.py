"""What an operator sees of the engine: one log format, run lifecycle lines and Prometheus metrics."""
