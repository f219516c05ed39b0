"""The internal context query: tokens, the views a visit may read, and the agent's tools."""
