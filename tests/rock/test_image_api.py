"""The fleet's image API (`POST /v1/images`, `rock.sdk.Images` / `AsyncImages`) without Docker: the wire
models, the call, and the admin's refusals before any worker is asked (build folders only under the
operator's build roots, sizes under its limits)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from rock.sdk import calls
from rock.sdk.errors import BadRequest, ImageFailed, WorkerUnavailable, error_from_response
from rock.sdk.images import AsyncImages, Images
from rock.sdk.types import ErrorBody, ImageInfo, ImageRequest
from rock.worker import contract


def test_a_request_names_exactly_one_source() -> None:
    ImageRequest(build_context="/srv/tasks/t1/environment")
    ImageRequest(image="python:3.11-slim")
    for both_or_none in ({}, {"build_context": "/srv/x", "image": "python:3.11"}):
        with pytest.raises(ValidationError, match="exactly one of build_context"):
            ImageRequest(**both_or_none)


@pytest.mark.parametrize(
    "field",
    [
        {"repository": "Rome-Bench/t1"},  # Docker refuses upper case
        {"repository": "rome-bench/t1:v1"},  # the tag is the content's hash, never the caller's
        {"repository": "-leading"},
        {"dockerfile": "../Dockerfile"},  # a name in the folder, not a path out of it
        {"network": "host"},
        {"memory": "1k"},
        {"cpus": 0},
    ],
)
def test_a_request_refuses_what_a_build_may_not_be_given(field: dict) -> None:
    with pytest.raises(ValidationError):
        ImageRequest(build_context="/srv/tasks/t1", **field)


def test_the_call_posts_the_request_and_reads_the_info() -> None:
    request = ImageRequest(build_context="/srv/t", repository="rome-bench/t", network="packages")
    call = calls.ensure_image(request)
    assert (call.method, call.path, call.json, call.timeout) == (
        "POST",
        "/v1/images",
        request.model_dump(),
        None,
    )


def test_both_hops_speak_the_same_models_and_the_failure_comes_back_typed() -> None:
    assert contract.ImageRequest is ImageRequest and contract.ImageInfo is ImageInfo
    assert contract.IMAGE_ENSURE_PATH == contract.IMAGES_PATH + "/ensure"
    body = ErrorBody(type="ImageFailed", message="building x failed: step 2").model_dump_json().encode()
    error = error_from_response(422, body, None, "http://admin")
    assert isinstance(error, ImageFailed) and error.message == "building x failed: step 2"
    info = ImageInfo.model_validate_json('{"tag": "rome-bench/t:0123456789ab", "workdir": "/app"}')
    assert info.notes == [] and info.worker is None


def test_the_admin_builds_only_under_its_roots_within_its_limits(admin_factory, tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    (root / "t1").mkdir(parents=True)
    admin = admin_factory(limits={"build_contexts": [root], "max_memory": "4g"})
    images = Images(admin_url=admin.url)
    with pytest.raises(BadRequest, match="--build-context-root"):
        images.ensure(build_context=str(tmp_path))
    with pytest.raises(BadRequest, match="--build-context-root"):
        images.ensure(build_context=str(root / ".." / "elsewhere"))
    with pytest.raises(BadRequest, match="max_memory=4g"):
        images.ensure(build_context=str(root / "t1"), memory="8g")
    # Allowed: then it needs a worker, and this admin has none.
    with pytest.raises(WorkerUnavailable, match="no worker"):
        images.ensure(build_context=str(root / "t1"))
    with pytest.raises(WorkerUnavailable, match="no worker"):
        images.ensure(image="python:3.11")

    async def refused() -> None:
        with pytest.raises(BadRequest, match="--build-context-root"):
            await AsyncImages(admin_url=admin.url).ensure(build_context="/etc")

    asyncio.run(refused())
