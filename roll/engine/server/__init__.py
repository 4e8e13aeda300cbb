"""OpenAI-compatible HTTP server over any `InferenceEngine` (`roll serve`)."""

from roll.engine.server.app import create_app

__all__ = ["create_app"]
