"""schemathesis against the OpenAPI of a real admin on loopback (issue 18): no request, valid or not, gets a
5xx, and every status code it answers with is documented on its route.

The admin has no worker and `max_waiting=0`, so a create is admitted or refused without containers: valid
ones get 429 at once (no room), invalid ones 422. Sandbox routes then answer 404 or 422. The run is bounded
(examples per operation) and seeded (derandomized Hypothesis, no example database), so it is the same
every time.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from rock.admin.config import AdminConfig
from rock.fleet import AdminThread, free_port, short_tmp

pytestmark = pytest.mark.slow
EXAMPLES = 20
"""Examples per operation and mode: ~650 requests in all."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]


@pytest.fixture(scope="module")
def admin_schema() -> Iterator[schemathesis.BaseSchema]:
    config = AdminConfig(port=free_port(), state_dir=short_tmp("rock-schema-"), max_waiting=0)
    try:
        with AdminThread(config, envs=True) as admin:
            yield schemathesis.openapi.from_url(f"{admin.url}/openapi.json")
    finally:
        shutil.rmtree(config.state_dir, ignore_errors=True)


def _exercise(operation, mode: GenerationMode) -> None:  # type: ignore[no-untyped-def]
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=CHECKS, timeout=30)

    exercise()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_the_admin_answers_every_request_with_a_documented_non_5xx_status(admin_schema, mode):
    operations = [result.ok() for result in admin_schema.get_all_operations()]
    assert len(operations) >= 15
    failures = []
    for operation in operations:
        try:
            _exercise(operation, mode)
        except Unsatisfiable:  # nothing of this operation can be made invalid (no body, free-form strings)
            assert mode is GenerationMode.NEGATIVE, operation.label
        except FailureGroup as group:  # every operation runs; the report lists all that failed
            failures.append(f"{operation.label}: {group.message}")
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
