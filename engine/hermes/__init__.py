"""agent and smartAction nodes on a remote Hermes Agent gateway: client, probe, event mapping, the agent."""
