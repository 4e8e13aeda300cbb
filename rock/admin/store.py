"""The admin's durable state: one row per sandbox, in SQLite by default or any SQLAlchemy URL (PostgreSQL).

Each row keeps the whole `SandboxInfo` as JSON plus the columns queries filter on, so restarting the admin
loses nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sqlalchemy import Float, String, Text, create_engine, event, exc, select
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


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def safe_url(url: str) -> str:
    """`url` with its password masked, for logs and error messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "<an unparsable database URL>"


_UPSERTS = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


class StoreUnavailable(ValueError):
    """The store cannot be opened: a missing driver, a bad URL, or a database that does not answer."""


class SandboxStore:
    """Synchronous and short: each call is one small transaction."""

    def __init__(self, url: str) -> None:
        if url.startswith("sqlite:///"):
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        shown = safe_url(url)
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
        self._insert = _UPSERTS[self._engine.dialect.name]
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
        """Insert or replace the sandbox's row in one statement (an upsert: no read first)."""
        row = {
            "id": info.id,
            "owner": info.owner,
            "state": info.state.value,
            "worker_id": info.worker_id,
            "last_activity": last_activity,
            "info": info.model_dump_json(),
        }
        statement = self._insert(SandboxRow).values(row)
        statement = statement.on_conflict_do_update(
            index_elements=[SandboxRow.id], set_={k: v for k, v in row.items() if k != "id"}
        )
        with self._engine.begin() as connection:
            connection.execute(statement)

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
        """Record the last request time of many sandboxes at once (the admin batches these)."""
        if not activity:
            return
        with Session(self._engine) as session, session.begin():
            for sandbox_id, when in activity.items():
                row = session.get(SandboxRow, sandbox_id)
                if row is not None:
                    row.last_activity = max(row.last_activity, when)

    def close(self) -> None:
        self._engine.dispose()
