"""The model: run events, the Run aggregate, workflow definitions and output declarations."""
