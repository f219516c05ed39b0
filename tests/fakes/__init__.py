"""Fakes that speak real wire protocols, for integration tests."""
