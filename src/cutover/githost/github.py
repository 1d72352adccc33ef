"""GitHub and GitHub Enterprise through the REST contents API.

`GET /repos/{owner}/{repo}/contents/{path}?ref=` gives the content and the blob `sha`; a `PUT` with that
`sha` is the compare-and-swap: GitHub answers 409 when the file moved since, 422 on a bad body. The API
root is https://api.github.com, or `git.apiUrl` (GitHub Enterprise: https://HOST/api/v3).
"""

from __future__ import annotations

from urllib.parse import urlsplit

from cutover.githost.base import escaped
from cutover.githost.contents import ContentsApi


def default_api(url: str) -> str:
    host = urlsplit(url).netloc
    return "https://api.github.com" if host in ("github.com", "www.github.com") else f"https://{host}/api/v3"


class GitHub(ContentsApi):
    name = "github"
    api_root = staticmethod(default_api)

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
                **super().headers(token)}

    def _pulls_query(self, branch: str) -> dict[str, str]:
        return {"state": "open", "head": f"{self.owner}:{branch}"}

    async def _branch_from_base(self, branch: str) -> None:
        """Point `branch` at the base head: create it, or move a leftover one there (no open request uses it)."""
        refs = f"{self.root}/git/refs"
        base = await self.call("GET", f"{self.root}/git/ref/heads/{escaped(self.branch)}",
                               what=f"read the head of {self.branch}")
        sha = base.json()["object"]["sha"]
        existing = await self._answer("GET", f"{self.root}/git/ref/heads/{escaped(branch)}",
                                      what=f"look for branch {branch}")  # under the whole-answer deadline
        if existing.status_code == 200:
            await self.call("PATCH", f"{refs}/heads/{escaped(branch)}", json={"sha": sha, "force": True},
                            what=f"reset branch {branch}")
        else:
            await self.call("POST", refs, json={"ref": f"refs/heads/{branch}", "sha": sha},
                            what=f"create branch {branch}")
