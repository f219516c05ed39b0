"""Run workspaces: one directory per run, safe relative paths, listing and retention."""
