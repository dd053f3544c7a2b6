"""Downloading files safely (debounce/worker/extraction/download.py, issue 39): the size cap on
the bytes, Slack tokens only to Slack's hosts, external hosts only when allowed and never at a
private address, a sign-in page as the missing scope. Against the file-host stand-in on
loopback (standins/file_host.py) over real HTTP."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from debounce.worker.extraction import ExtractionFailed, ExtractionLimits, extract_file
from debounce.worker.extraction.download import FetchPolicy, download, token_allowed
from standins.file_host import FileHost
from standins.sample_files import text_pdf
from standins.server import BackgroundServer

PDF = "application/pdf"
TOKEN = "xoxb-files"


@pytest.fixture
def host() -> Iterator[FileHost]:
    files = FileHost(now=lambda: 1_000_000.0)
    files.tokens_with_scope.add(TOKEN)
    with BackgroundServer(files.app()) as server:
        files.base_url = server.url
        yield files


def policy(host: FileHost, **changes: object) -> FetchPolicy:
    """The stand-in's host:port takes a token, as the configured API host of a stand-in does."""
    values: dict[str, object] = {
        "max_bytes": 1_000_000,
        "token_hosts": frozenset({host.base_url.removeprefix("http://")}),
    }
    values.update(changes)
    return FetchPolicy(**values)  # type: ignore[arg-type]


def test_token_goes_only_to_slack_over_https() -> None:
    assert token_allowed("https://files.slack.com/files-pri/T1-F1/a.pdf")
    assert token_allowed("https://slack.com/api/files.info")
    assert token_allowed("https://files.slack-gov.com/x")
    for url in (
        "http://files.slack.com/x",
        "https://evilslack.com/x",
        "https://slack.com.evil.io/x",
        "https://example.com/slack.com",
        "ftp://slack.com/x",
    ):
        assert not token_allowed(url), url
    assert token_allowed("http://127.0.0.1:9/x", frozenset({"127.0.0.1:9"}))
    assert not token_allowed("http://127.0.0.1:10/x", frozenset({"127.0.0.1:9"}))


async def test_presigned_url_downloads_until_it_expires(host: FileHost, tmp_path: Path) -> None:
    data = text_pdf([["quarterly report"]])
    host.add("ws/abc/report.pdf", data, PDF)
    url = host.presign("ws/abc/report.pdf", expires_in=3600)
    got = await download(url, str(tmp_path / "f"), policy(host))
    assert (got.size, got.sha256, got.media_type) == (len(data), hashlib.sha256(data).hexdigest(), PDF)
    assert extract_file(got.path, got.media_type, ExtractionLimits()).markdown == "quarterly report"
    host.now = lambda: 1_000_000.0 + 3601
    with pytest.raises(ExtractionFailed, match=r"^download failed: HTTP 403 from 127\.0\.0\.1$") as caught:
        await download(url, str(tmp_path / "g"), policy(host))
    assert caught.value.code == "download_failed"
    assert not (tmp_path / "g").exists()


async def test_size_cap_counts_the_streamed_bytes(host: FileHost, tmp_path: Path) -> None:
    host.add("big.bin", b"x" * 1_500_000, "application/octet-stream")
    with pytest.raises(ExtractionFailed, match=r"^too large: over 1 MB$"):
        await download(f"{host.base_url}/chunked/big.bin", str(tmp_path / "f"), policy(host))
    assert not (tmp_path / "f").exists()
    assert "content-length" not in host.requests[-1][2]  # the request's; the answer had none
    with pytest.raises(ExtractionFailed, match=r"^too large: 1\.5 MB > 1 MB \(declared\)$"):
        await download(f"{host.base_url}/remote/big.bin", str(tmp_path / "f"), policy(host))


async def test_slack_private_url_needs_the_scope(host: FileHost, tmp_path: Path) -> None:
    host.add("T1-F1", b"hello", "text/plain")
    url = f"{host.base_url}/files-pri/T1-F1/notes.txt"
    got = await download(url, str(tmp_path / "f"), policy(host), token=TOKEN)
    assert (tmp_path / "f").read_bytes() == b"hello"
    assert got.media_type == "text/plain"
    assert host.requests[-1][2]["authorization"] == f"Bearer {TOKEN}"
    with pytest.raises(ExtractionFailed) as caught:
        await download(url, str(tmp_path / "f"), policy(host), token="xoxb-no-files-read")
    assert (caught.value.code, caught.value.reason) == (
        "missing_scope",
        "a sign-in page where a file was expected: the token lacks the files:read scope",
    )


async def test_token_never_leaves_the_token_hosts(host: FileHost, tmp_path: Path) -> None:
    host.add("r.txt", b"remote", "text/plain")
    foreign = policy(host, token_hosts=frozenset())
    seen = len(host.requests)
    never = r"^refused: the workspace token is never sent to 127\.0\.0\.1$"
    with pytest.raises(ExtractionFailed, match=never):
        await download(f"{host.base_url}/remote/r.txt", str(tmp_path / "f"), foreign, token=TOKEN)
    assert len(host.requests) == seen  # nothing was sent
    # A redirect off the token's hosts goes on without the token ("localhost" is not the
    # token host "127.0.0.1:port").
    port = host.base_url.rsplit(":", 1)[1]
    target = f"http://localhost:{port}/remote/r.txt"
    await download(f"{host.base_url}/redirect?to={target}", str(tmp_path / "f"), policy(host), token=TOKEN)
    (first, second) = host.requests[-2:]
    assert first[2]["authorization"] == f"Bearer {TOKEN}"
    assert second[1] == "/remote/r.txt" and "authorization" not in second[2]


async def test_external_files_only_from_allowed_public_hosts(host: FileHost, tmp_path: Path) -> None:
    host.add("e.txt", b"external", "text/plain")
    port = host.base_url.rsplit(":", 1)[1]
    seen = len(host.requests)
    with pytest.raises(ExtractionFailed, match=r"^refused: external host 127\.0\.0\.1 is not allowed$"):
        await download(f"{host.base_url}/remote/e.txt", str(tmp_path / "f"), policy(host), external=True)
    allowed = policy(host, external_hosts=frozenset({"127.0.0.1", "localhost"}))
    with pytest.raises(ExtractionFailed, match=r"^refused: 127\.0\.0\.1 is not a public address$"):
        await download(f"{host.base_url}/remote/e.txt", str(tmp_path / "f"), allowed, external=True)
    resolved = r"^refused: localhost resolves to a non-public address \((127\.0\.0\.1|::1)\)$"
    with pytest.raises(ExtractionFailed, match=resolved):
        await download(f"http://localhost:{port}/remote/e.txt", str(tmp_path / "f"), allowed, external=True)
    with pytest.raises(ExtractionFailed, match=r"^refused: file scheme in a file URL$"):
        await download("file:///etc/passwd", str(tmp_path / "f"), allowed, external=True)
    assert len(host.requests) == seen  # not one request reached the host
