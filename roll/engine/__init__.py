"""Inference engines behind one protocol: the embedded torch engine and its OpenAI-compatible server."""
