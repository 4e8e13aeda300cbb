"""The PostgreSQL store (issue 20): a missing driver or a silent server is one clear line, never a
traceback, and the URL's password never reaches a log or an error."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from rock.admin.auth import LOCAL
from rock.admin.config import AdminConfig
from rock.admin.service import Admin
from rock.admin.states import advance
from rock.admin.store import SandboxStore, StoreUnavailable
from rock.sdk.types import SandboxInfo, SandboxSpec, SandboxState

SECRET = "hunter2-secret"

WITHOUT_DRIVER = """
import sys
sys.modules["psycopg"] = None  # as if `ale[postgres]` were not installed
sys.modules["psycopg2"] = None
from rock.cli import app
app()
"""


def test_a_missing_driver_is_one_clear_line_without_the_password(tmp_path):
    url = f"postgresql+psycopg://rock:{SECRET}@127.0.0.1:1/rock"
    args = ["admin", "serve", "--database-url", url, "--state-dir", str(tmp_path), "--no-local-worker"]
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_DRIVER, *args], capture_output=True, text=True, timeout=120
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output and SECRET not in output
    assert "pip install 'ale[postgres]'" in output and "rock:***@127.0.0.1:1/rock" in output


def test_a_silent_server_is_a_clear_error_without_the_password():
    with pytest.raises(StoreUnavailable, match="does not answer") as caught:
        SandboxStore(f"postgresql+psycopg://rock:{SECRET}@127.0.0.1:1/rock")
    assert SECRET not in str(caught.value) and "rock:***@" in str(caught.value)


async def test_the_admin_never_logs_the_database_password(local_postgres, tmp_path, caplog):
    url = local_postgres.create_database("never_logged")
    assert local_postgres.password in url
    caplog.set_level(logging.DEBUG)
    admin = Admin(AdminConfig(state_dir=tmp_path, database_url=url, reap_interval=3600))
    pending = SandboxInfo(
        id="a",
        state=SandboxState.PENDING,
        spec=SandboxSpec(),
        owner="local",
        worker_id="w1",
        created_at=datetime.now(UTC),
    )
    admin.store.save(advance(pending, SandboxState.RUNNING), 0.0)
    await admin.start()
    assert (await admin.get("a", LOCAL)).state is SandboxState.RUNNING
    await admin.close()
    assert "1 sandboxes keep running" in caplog.text
    assert local_postgres.password not in caplog.text and "rock:***@127.0.0.1" in caplog.text
