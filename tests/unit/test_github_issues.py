"""`list_issues`' reading of GitHub's paging and rate-limit answers."""

from __future__ import annotations

import time

import httpx

from keel.worker.plugins.github import MAX_RATE_LIMIT_WAIT_S, _next_link, _rate_limit_wait


def answer(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


def test_rate_limit_answers_say_how_long_to_wait() -> None:
    assert _rate_limit_wait(answer(200)) is None
    assert _rate_limit_wait(answer(403)) is None  # a refusal, not a rate limit
    assert _rate_limit_wait(answer(429, **{"retry-after": "3"})) == 3.0
    reset = str(int(time.time()) + 10)
    wait = _rate_limit_wait(
        answer(403, **{"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset})
    )
    assert wait is not None and 8 <= wait <= 11
    assert _rate_limit_wait(answer(429, **{"retry-after": "soon"})) == MAX_RATE_LIMIT_WAIT_S + 1


def test_the_next_page_comes_from_the_link_header() -> None:
    header = (
        '<https://api.github.com/repositories/1/issues?page=2>; rel="next", '
        '<https://api.github.com/repositories/1/issues?page=9>; rel="last"'
    )
    assert _next_link(header) == "https://api.github.com/repositories/1/issues?page=2"
    assert _next_link('<https://x/issues?page=1>; rel="prev"') is None
