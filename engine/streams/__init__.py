"""One run's stream in this process: its single writer and its hot read side."""
