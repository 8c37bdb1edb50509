"""GIVEN the README's first steps WHEN they run word for word in an empty environment
THEN the AWS CLI creates a queue on the real local server."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:9324"


def _first_steps() -> tuple[dict[str, str], list[str]]:
    """The `export` line and the first `aws sqs create-queue` line of README's Use it."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Use it", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    export = next(line for line in lines if line.startswith("export "))
    command = next(line for line in lines if re.search(r"aws sqs create-queue", line))
    env = dict(word.split("=", 1) for word in shlex.split(export)[1:])
    return env, shlex.split(command)


def test_the_readme_create_queue_works_from_an_empty_environment(
    dmq_url: str, tmp_path: Path,
) -> None:
    env, command = _first_steps()
    assert README_URL in command, command
    command = [dmq_url if word == README_URL else word for word in command]
    # Nothing but what the README exports: no ~/.aws (HOME is empty), no PATH tricks.
    clean = {**env, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run(command, cwd=ROOT, env=clean, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["QueueUrl"] == f"{dmq_url}/000000000000/q"
