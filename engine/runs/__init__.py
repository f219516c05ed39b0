"""Run application services: creation (with idempotency), writers, state and hot reads."""
