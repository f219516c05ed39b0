"""Pure folds over a run's events: visit index, predecessor paths, run summary, SSE messages."""
