"""The per-sandbox user of SandboxSpec: numeric uid:gid, `root` as 0:0, the default unprivileged."""

import pytest
from pydantic import ValidationError

from rock.sdk.types import SandboxSpec


@pytest.mark.parametrize(
    ("given", "stored", "root"),
    [
        ("1000:1000", "1000:1000", False),
        ("root", "0:0", True),
        ("0", "0:0", True),
        ("1234", "1234:1234", False),
    ],
)
def test_user_is_stored_as_uid_and_gid(given: str, stored: str, root: bool):
    spec = SandboxSpec(user=given)
    assert (spec.user, spec.is_root) == (stored, root)


def test_the_default_user_is_unprivileged():
    assert (SandboxSpec().user, SandboxSpec().is_root) == ("1000:1000", False)


@pytest.mark.parametrize("given", ["alice", "1000:staff", "", "-1", "0:0:0"])
def test_a_user_that_is_not_numeric_or_root_is_refused_with_how_to_fix(given: str):
    with pytest.raises(ValidationError, match="is not 'uid:gid', 'uid' or 'root'"):
        SandboxSpec(user=given)
