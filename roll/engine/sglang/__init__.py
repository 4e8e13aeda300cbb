"""The SGLang inference engine (extra `gpu`): the `InferenceEngine` protocol on SGLang's offline engine.

- `config.py`: `SGLangEngineConfig` (`engines.engine.type: sglang`), the ServerArgs we pass.
- `translate.py`: pure translation of our requests to SGLang's arguments and of its answers to our results.
- `runtime.py`: every call into SGLang (imported lazily; sglang itself only when an engine starts).
- `engine.py`: `SGLangEngine` (gate for weight updates and sleep, n completions as n streams, abort).

Importing this package needs neither sglang nor torch; building an `SGLangEngine` without sglang or a CUDA
device raises `EngineError` saying what to install or to use `engines.engine.type: torch`.
"""

from roll.engine.sglang.config import SGLangEngineConfig
from roll.engine.sglang.engine import SGLangEngine

__all__ = ["SGLangEngine", "SGLangEngineConfig"]
