"""The Python clients, the in-process check, the CLI wiring, and the lazy imports."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from ragsense.cli._main import build_parser, main
from ragsense.guard import AsyncGuardClient, GuardClient, GuardError, RunningGuard, check
from ragsense.guard._check import Policy

from ._helpers import ROW


def test_sync_client_checks_one_row_and_a_batch(open_guard: RunningGuard) -> None:
    with GuardClient(open_guard.url) as client:
        assert client.ready()
        reply = client.check(ROW["question"], ROW["contexts"], ROW["answer"], request_id="c1")
        assert reply.id == "c1" and reply.passed and reply.results[0]["verdict"] == "grounded"
        batch = client.check_rows([{**ROW, "id": "x"}, {**ROW, "id": "y"}], attribution=True)
        assert [r["id"] for r in batch.results] == ["x", "y"] and "attribution" in batch.results[0]
        with pytest.raises(GuardError) as refused:
            client.check(ROW["question"], ROW["contexts"], ROW["answer"], min_consens=-1.0)
        assert refused.value.status == 422 and refused.value.field == "min_consens"


def test_async_client_matches_the_sync_one(open_guard: RunningGuard) -> None:
    async def main() -> float:
        async with AsyncGuardClient(open_guard.url) as client:
            assert await client.ready()
            reply = await client.check(ROW["question"], ROW["contexts"], ROW["answer"])
            return float(reply.results[0]["consens"])

    with GuardClient(open_guard.url) as client:
        expected = client.check(ROW["question"], ROW["contexts"], ROW["answer"]).results[0]["consens"]
    assert asyncio.run(main()) == expected


def test_in_process_check_equals_the_server(open_guard: RunningGuard) -> None:
    with GuardClient(open_guard.url) as client:
        served = client.check(ROW["question"], ROW["contexts"], ROW["answer"], attribution=True).results[0]
    local = check(ROW["question"], ROW["contexts"], ROW["answer"], model="fake", attribution=True)
    assert local == {**served, "id": "0"}
    seattle = "David Baker designs proteins in Seattle."  # a score below 1 by any default
    assert (
        check(ROW["question"], ROW["contexts"], seattle, model="fake", min_consens=0.9999)["passed"] is False
    )


def test_policy_bounds() -> None:
    assert Policy(min_consens=0.1, bounds=(-0.5, 0.5)).threshold(-0.4) == -0.4
    with pytest.raises(ValueError, match="within"):
        Policy(min_consens=0.1).threshold(0.0)


def test_cli_refuses_a_public_bind_without_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["guard", "--model", "fake", "--host", "0.0.0.0", "--api-key-env", "NO_SUCH_VAR_X"]) == 2
    assert "without API keys" in capsys.readouterr().err


def test_cli_flags_build_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragsense.cli._guard import build_config

    monkeypatch.setenv("MY_GUARD_KEYS", "k-0123456789abcdefgh")
    args = build_parser().parse_args(
        ["guard", "--model", "fake", "--api-key-env", "MY_GUARD_KEYS", "--min-consens", "0.3",
         "--min-consens-bounds", "0.1", "0.9", "--max-rows", "4", "--max-wait-ms", "5", "--queue-rows", "8",
         "--body-timeout", "2.5", "--docs", "--max-export-rows", "8", "--header-timeout", "3",
         "--max-connections", "50"]
    )  # fmt: skip
    config = build_config(args)
    assert (config.export_rows, config.header_timeout_s, config.max_connections) == (8, 3.0, 50)
    assert config.model == "fake" and config.limits.max_rows == 4 and config.max_queue_rows == 8
    assert config.policy.min_consens == 0.3 and config.policy.allowed == (0.1, 0.9)
    assert config.max_wait_ms == 5 and len(config.api_keys.ids) == 1
    assert config.body_timeout_s == 2.5 and config.docs is True
    assert build_config(build_parser().parse_args(["guard", "--model", "fake"])).docs is False


def test_import_ragsense_does_not_import_fastapi_and_a_missing_extra_names_the_install() -> None:
    code = (
        "import sys, ragsense, ragsense.guard\n"
        "assert 'fastapi' not in sys.modules and 'uvicorn' not in sys.modules, 'eager import'\n"
        "sys.modules['fastapi'] = None\n"
        "try:\n"
        "    ragsense.guard.create_app\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'ragsense[guard]'" in out


def test_bands_file_sets_the_verdicts_and_the_default_threshold(tmp_path: Path) -> None:
    from ragsense.cli._guard import build_config
    from ragsense.consens import DEFAULT_AGGREGATION, Bands
    from ragsense.guard import GuardConfig

    from ._helpers import post, running

    row = {**ROW, "answer": "Marie Curie studied radium in Paris."}
    score = check(row["question"], row["contexts"], row["answer"], model="fake")["consens"]
    edge = round((score + 1) / 2, 6)  # above this row's score: its verdict must turn ungrounded
    path = tmp_path / "bands.json"
    Bands(DEFAULT_AGGREGATION.value, grounded_at=edge, ungrounded_below=edge).save(path)
    config = build_config(build_parser().parse_args(["guard", "--model", "fake", "--bands", str(path)]))
    assert config.bands is not None and config.policy.min_consens == edge
    explicit = build_parser().parse_args(
        ["guard", "--model", "fake", "--bands", str(path), "--min-consens", "0.5"]
    )
    assert build_config(explicit).policy.min_consens == 0.5
    with running(GuardConfig(model="fake", bands=config.bands)) as guard:  # no policy: the bands' edge
        [result] = post(guard.url, row).json()["results"]
    assert result["min_consens"] == edge and result["passed"] is False
    assert result["verdict"] == "ungrounded" and result["consens"] == score
