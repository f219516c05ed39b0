"""A run's write and read side: creation (with idempotency), the service, the single writer and the hot read side."""
