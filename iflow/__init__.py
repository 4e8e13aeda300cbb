"""iFlow: the terminal agent and its context engineering."""
