"""GitHub and GitHub Enterprise through the REST contents API.

`GET /repos/{owner}/{repo}/contents/{path}?ref=` gives the content and the blob `sha`; a `PUT` with that
`sha` is the compare-and-swap: GitHub answers 409 when the file moved since, 422 on a bad body. The API
root is https://api.github.com, or `git.apiUrl` (GitHub Enterprise: https://HOST/api/v3).
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from cutover.githost.contents import ContentsApi


def default_api(url: str) -> str:
    host = urlsplit(url).netloc
    return "https://api.github.com" if host in ("github.com", "www.github.com") else f"https://{host}/api/v3"


class GitHub(ContentsApi):
    name = "github"

    def __init__(self, *, url: str, branch: str, token: str | None, api_url: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(url=url, branch=branch, token=token, api_url=api_url or default_api(url),
                         transport=transport)

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                **super().headers(token)}
