"""Signed webhooks of runs: the settings, the signature, the body, one delivery attempt, and planning deliveries."""
