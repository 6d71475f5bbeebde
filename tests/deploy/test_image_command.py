"""`make image` (scripts/image.sh) refuses what it cannot build, with one line each, before any
build starts. That it builds the image the cluster runs is `make e2e`'s: it builds through it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import REPO


def image(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "image.sh")],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"IMAGE": "Bad:tag"}, "make image: IMAGE must be name:tag, got 'Bad:tag'"),
        ({"IMAGE": "x/fioprobe"}, "make image: IMAGE must be name:tag, got 'x/fioprobe'"),
        (
            {"IMAGE": "x/fioprobe:1", "IMAGE_PULL": "sometimes"},
            "make image: IMAGE_PULL must be never or unset, got 'sometimes'",
        ),
        (
            {"IMAGE": "x/fioprobe:1", "CONTAINER_TOOL": "/nonexistent/podman"},
            "make image: CONTAINER_TOOL: /nonexistent/podman is not installed",
        ),
    ],
)
def test_what_cannot_be_built_is_refused_with_one_line(env: dict[str, str], message: str) -> None:
    result = image(**env)
    assert result.returncode == 1
    assert result.stderr.strip() == message, result.stderr


def test_without_image_the_manifests_image_is_named() -> None:
    """No IMAGE: the name the manifests and the chart give (publish.json's image, fioprobe's
    version as the tag). `true` stands in for the tool: the command it is given is shown, no
    image is built."""
    from fioprobe import __version__

    published = json.loads((REPO / "publish.json").read_text())["image"]
    result = image(CONTAINER_TOOL="true", IMAGE_PULL="never")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{published}:{__version__}"
    assert f"make image: building {published}:{__version__} with true" in result.stderr
