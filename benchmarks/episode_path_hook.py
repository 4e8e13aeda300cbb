"""Started by benchmarks/episode_path.py in every Python process of the measured run."""

import atexit
import json
import os
import socket
import sys
import threading
import time
import traceback

import coverage

coverage.process_startup()  # a no-op where coverage's own .pth (coverage >= 7.10) already started it

_DIR = os.environ["EPISODE_PATH_DIR"]
_MARK = os.environ["EPISODE_PATH_MARK"]
_ROOT = os.environ["EPISODE_PATH_ROOT"]
_PACKAGES = tuple(os.path.join(_ROOT, p) + os.sep for p in ("roll", "rock", "iflow", "rome"))


def _title():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _note_title(seen):
    title = _title()
    if title and title not in seen:
        seen.add(title)
        with open(os.path.join(_DIR, "roles", f"{os.getpid()}.json"), "w") as f:
            json.dump(sorted(seen), f)


# coverage saves once more at exit; a save from this thread at that moment crashed the process (two
# threads closing one SQLite connection), so the exit handler (it runs before coverage's) ends these saves.
_saving = threading.Lock()
_exiting = False


def _stop_saving():
    global _exiting
    with _saving:
        _exiting = True


def _watch():
    global _after
    cov = coverage.Coverage.current()
    seen = set()
    while True:
        _note_title(seen)
        with _saving:
            if _exiting:
                return
            if not _after and os.path.exists(_MARK) and os.path.getsize(_MARK) > 0:
                _after = True
                if cov is not None:
                    cov.switch_context(os.environ["EPISODE_PATH_AFTER"])
            if cov is not None:
                cov.save()
        time.sleep(1.0)


# Where project code calls out of the project: into a torch module (the model), the optimizer, HTTP, the
# Docker SDK, Ray (remote calls, get, put, wait) or a child process.
_CROSSINGS = (
    (os.sep + os.path.join("torch", "nn", "modules", "module.py"), "model"),
    (os.sep + os.path.join("torch", "_tensor.py"), "model"),  # backward()
    (os.sep + os.path.join("torch", "nn", "functional.py"), "model"),
    (os.sep + os.path.join("torch", "optim") + os.sep, "optimizer"),
    (os.sep + "httpx" + os.sep, "http"),
    (os.sep + "docker" + os.sep, "docker"),
    (os.sep + "ray" + os.sep, "ray"),
    (os.sep + "subprocess.py", "subprocess"),
)
_kinds = {}
_stacks = set()
_after = False


# Where project code hands work to another thread or asyncio task: the chain a reader follows goes on there
# (the new stack starts at the task's or thread's entry), so the handing-off stack is recorded too.
_HANDOFFS = {
    os.path.join("asyncio", "tasks.py"): {"create_task", "ensure_future", "run_coroutine_threadsafe"},
    os.path.join("asyncio", "base_events.py"): {"create_task", "run_in_executor", "call_soon_threadsafe"},
    os.path.join("asyncio", "threads.py"): {"to_thread"},
    os.path.join("concurrent", "futures", "thread.py"): {"submit"},
    os.sep + "threading.py": {"start"},
}
_handoff_names = {}


def _crossing(code):
    filename = code.co_filename
    kind = _kinds.get(filename)
    if kind is None:
        project = filename.startswith(_PACKAGES)
        kind = "" if project else next((k for needle, k in _CROSSINGS if needle in filename), "")
        _kinds[filename] = kind
        _handoff_names[filename] = (
            set()
            if project
            else next((names for suffix, names in _HANDOFFS.items() if filename.endswith(suffix)), set())
        )
    if not kind and code.co_name in _handoff_names[filename]:
        return "handoff"
    return kind


def _profile(frame, event, arg):
    if event != "call" or _after:
        return
    kind = _crossing(frame.f_code)
    caller = frame.f_back
    if not kind or caller is None or not caller.f_code.co_filename.startswith(_PACKAGES):
        return
    stack = []
    while caller is not None:
        if caller.f_code.co_filename.startswith(_PACKAGES):
            stack.append(os.path.relpath(caller.f_code.co_filename, _ROOT) + ":" + caller.f_code.co_name)
        caller = caller.f_back
    key = (kind, tuple(stack))
    if key not in _stacks:
        _stacks.add(key)
        with open(os.path.join(_DIR, "stacks", f"{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps({"kind": kind, "stack": stack}) + "\n")


_listen = socket.socket.listen


def _recording_listen(self, *args):
    try:
        address = self.getsockname()
    except OSError:
        address = None
    frames = [
        f"{os.path.relpath(f.filename, _ROOT)}:{f.lineno}"
        for f in traceback.extract_stack()[:-1]
        if f.filename.startswith(_PACKAGES)
    ]
    record = {"pid": os.getpid(), "title": _title(), "address": address, "frames": frames}
    with open(os.path.join(_DIR, "listens.jsonl"), "a") as f:
        f.write(json.dumps(record, default=str) + "\n")
    return _listen(self, *args)


socket.socket.listen = _recording_listen
sys.setprofile(_profile)
threading.setprofile(_profile)
atexit.register(_stop_saving)
threading.Thread(target=_watch, name="episode-path-coverage", daemon=True).start()
