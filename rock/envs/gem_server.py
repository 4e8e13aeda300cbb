"""Runs inside a GEM sandbox (the image's python3 with gem-llm; nothing from this project is installed there).

`python3 gem_server.py SOCKET` serves one GEM environment on a unix socket, one JSON request per line:
`{"op": "make", "env_id": ..., "kwargs": {...}}`, `{"op": "reset", "seed": ...}`,
`{"op": "step", "action": ...}`, `{"op": "close"}`. Each answer is one JSON line:
`{"ok": true, "result": ...}` or `{"ok": false, "error": ...}`.
"""

import json
import os
import socket
import sys
import traceback


def _plain(value):
    """JSON-ready values: numpy scalars and arrays become numbers and lists, anything else its str."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


class EnvHost:
    def __init__(self):
        self.env = None

    def handle(self, request):
        op = request.get("op")
        if op == "make":
            import gem

            self.env = gem.make(request["env_id"], **request.get("kwargs", {}))
            return {"env_id": request["env_id"]}
        if self.env is None:
            raise RuntimeError("no environment yet: send make first")
        if op == "reset":
            observation, info = self.env.reset(seed=request.get("seed"))
            return {"observation": observation, "info": info}
        if op == "step":
            observation, reward, terminated, truncated, info = self.env.step(request["action"])
            return {
                "observation": observation,
                "reward": reward,
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "info": info,
            }
        if op == "close":
            close = getattr(self.env, "close", None)  # not every GEM environment has one
            if close is not None:
                close()
            self.env = None
            return {}
        raise ValueError(f"unknown op {op!r}; use make, reset, step or close")


def serve(path):
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(4)
    host = EnvHost()
    while True:
        connection, _ = listener.accept()
        with connection, connection.makefile("rwb") as stream:
            for line in stream:
                try:
                    answer = {"ok": True, "result": host.handle(json.loads(line))}
                except Exception as error:  # every failure goes back to the caller, the server lives on
                    answer = {
                        "ok": False,
                        "error": f"{type(error).__name__}: {error}",
                        "trace": traceback.format_exc(),
                    }
                stream.write(json.dumps(answer, default=_plain).encode() + b"\n")
                stream.flush()


if __name__ == "__main__":
    serve(sys.argv[1])
