"""`PrivateFleet`: a fleet of this process's own (an admin and one local worker on loopback), for a client
given no admin URL (`roll train`). It runs as a process of its own, `rock fleet`, so the client needs nothing
of the fleet's code; it ends when the client closes it or dies, and then removes every container it made.

with PrivateFleet(slots=4, build_roots=["/srv/tasks"]) as fleet:
    image = fleet.images.ensure(build_context="/srv/tasks/t1/environment")
    sandbox = Sandbox(image.tag, admin_url=fleet.url)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rock.sdk.errors import RockError
from rock.sdk.images import Images

STOP_TIMEOUT_S = 120.0  # stopping removes every container the fleet made


class PrivateFleet:
    """`packages`: the fleet's package cache (see `rock admin serve --package-cache`); None is $ALE_PACKAGES,
    else online. `build_roots`: folders the fleet builds images from (`images.ensure(build_context=...)` in
    them). The fleet builds the base images when it starts, if missing. Its own notices (a package cache
    that fell back to offline) go to this process's stderr."""

    def __init__(
        self,
        slots: int | None = None,
        packages: Literal["online", "offline"] | None = None,
        start_timeout: float = 300.0,
        build_roots: Sequence[str | Path] = (),
    ) -> None:
        if packages not in (None, "online", "offline"):
            raise ValueError(f"packages={packages!r} is not one of online, offline (or None: $ALE_PACKAGES)")
        self.slots, self.packages, self.start_timeout = slots, packages, start_timeout
        self.build_roots = [Path(root).resolve() for root in build_roots]
        self.url = ""
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None

    def __enter__(self) -> PrivateFleet:
        self._folder = Path(tempfile.mkdtemp(prefix="rock-private-fleet-"))
        ready = self._folder / "url"
        command = [sys.executable, "-m", "rock.cli", "fleet", "--parent-pid", str(os.getpid())]
        command += ["--ready", str(ready)]
        command += ["--slots", str(self.slots)] if self.slots is not None else []
        command += ["--packages", self.packages] if self.packages is not None else []
        command += [arg for root in self.build_roots for arg in ("--build-context-root", str(root))]
        # Its own session: a Ctrl-C meant for this process reaches the fleet as this process's close().
        self._process = subprocess.Popen(command, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while not ready.is_file():
            code = self._process.poll()
            if code is not None:
                self.close()
                raise RockError(
                    f"the private fleet (`rock fleet`) exited with {code} before it was up; its error is "
                    "above (is Docker running? `docker info`)"
                )
            if time.monotonic() > deadline:
                self.close()
                raise RockError(
                    f"the private fleet was not up within {self.start_timeout:g} s; raise start_timeout on a "
                    "slow machine, or start a fleet yourself (`rock admin serve`) and pass its URL"
                )
            time.sleep(0.1)
        self.url = ready.read_text().strip()
        return self

    @property
    def images(self) -> Images:
        """The fleet's images (`Images.ensure` builds one there)."""
        if not self.url:
            raise RockError("the private fleet is not started: use it in a `with` block (or call __enter__)")
        return Images(admin_url=self.url)

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the fleet and wait until it removed what it made."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None
