"""The admin's durable state: one row per sandbox, in SQLite by default or any SQLAlchemy URL (PostgreSQL).

Each row keeps the whole `SandboxInfo` as JSON plus the columns queries filter on, so restarting the admin
loses nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from sqlalchemy import Float, String, Text, bindparam, create_engine, event, exc, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from rock.sdk.types import SandboxInfo, SandboxState


class _Base(DeclarativeBase):
    pass


class SandboxRow(_Base):
    __tablename__ = "sandboxes"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner: Mapped[str] = mapped_column(String(128), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    worker_id: Mapped[str | None] = mapped_column(String(128), index=True)
    last_activity: Mapped[float] = mapped_column(Float)
    info: Mapped[str] = mapped_column(Text)


def _sqlite_pragmas(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _owner_only_file(path: Path) -> None:
    """Create the SQLite file owner-only (0600; SQLite gives its journal the same mode), or make an existing
    one so: it holds every tenant's sandboxes, their owners and environment variables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def safe_url(url: str) -> str:
    """`url` with its password masked, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "<an unparsable database URL>"


_UPSERTS = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}
_COLUMNS = ("id", "owner", "state", "worker_id", "last_activity", "info")
_TOUCH = (
    update(SandboxRow)
    .where(SandboxRow.id == bindparam("sid"), SandboxRow.last_activity < bindparam("when"))
    .values(last_activity=bindparam("when"))
)


def _row(info: SandboxInfo, last_activity: float) -> dict[str, object]:
    return {
        "id": info.id,
        "owner": info.owner,
        "state": info.state.value,
        "worker_id": info.worker_id,
        "last_activity": last_activity,
        "info": info.model_dump_json(),
    }


class StoreUnavailable(ValueError):
    """The store cannot be opened: a missing driver, a bad URL, or a database that does not answer."""


class SandboxStore:
    """Synchronous: each call is one transaction. The admin calls it from a thread (rock.admin.writer),
    never on its event loop."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            _owner_only_file(Path(url.removeprefix("sqlite:///")))
        shown = self.shown_url = safe_url(url)
        try:
            self._engine: Engine = create_engine(url)
        except (ImportError, exc.NoSuchModuleError) as error:
            raise StoreUnavailable(
                f"the store {shown} needs a database driver that is not installed ({error}); for "
                "PostgreSQL: pip install 'ale[postgres]' (psycopg), and write the URL postgresql+psycopg://..."
            ) from None
        except exc.ArgumentError as error:
            raise StoreUnavailable(f"{shown} is not a database URL ({error}); e.g. sqlite:///PATH") from None
        if self._engine.dialect.name == "sqlite":
            event.listen(self._engine, "connect", _sqlite_pragmas)
        if self._engine.dialect.name not in _UPSERTS:
            raise StoreUnavailable(
                f"the store {shown} is neither SQLite nor PostgreSQL, the two ROCK supports"
            )
        insert = _UPSERTS[self._engine.dialect.name](SandboxRow)
        self._upsert = insert.on_conflict_do_update(
            index_elements=[SandboxRow.id],
            set_={column: insert.excluded[column] for column in _COLUMNS if column != "id"},
        )
        try:
            _Base.metadata.create_all(self._engine)
        except exc.OperationalError as error:
            self._engine.dispose()
            reason = str(error.orig).strip().splitlines()[0]
            raise StoreUnavailable(
                f"the store {shown} does not answer ({reason}); check that the database server runs and the "
                "URL's host, port, user and password"
            ) from None

    def save(self, info: SandboxInfo, last_activity: float) -> None:
        """Insert or replace the sandbox's row (an upsert: no read first)."""
        self.commit([(info, last_activity)], {})

    def commit(self, rows: Sequence[tuple[SandboxInfo, float]], activity: dict[str, float]) -> None:
        """Upsert `rows` and record `activity` (see `touch`) in one transaction: all of it lands or none."""
        with self._engine.begin() as connection:
            if rows:
                connection.execute(self._upsert, [_row(info, last) for info, last in rows])
            if activity:
                connection.execute(_TOUCH, [{"sid": sid, "when": when} for sid, when in activity.items()])

    def get(self, sandbox_id: str) -> tuple[SandboxInfo, float] | None:
        with Session(self._engine) as session:
            row = session.get(SandboxRow, sandbox_id)
            return None if row is None else (SandboxInfo.model_validate_json(row.info), row.last_activity)

    def list(self, states: Iterable[SandboxState] | None = None) -> list[tuple[SandboxInfo, float]]:
        query = select(SandboxRow).order_by(SandboxRow.id)
        if states is not None:
            query = query.where(SandboxRow.state.in_([s.value for s in states]))
        with Session(self._engine) as session:
            rows = session.scalars(query).all()
            return [(SandboxInfo.model_validate_json(r.info), r.last_activity) for r in rows]

    def touch(self, activity: dict[str, float]) -> None:
        """Record the last request time of many sandboxes at once; a time never moves backwards."""
        self.commit([], activity)

    def close(self) -> None:
        self._engine.dispose()
