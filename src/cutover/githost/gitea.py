"""Gitea and Forgejo through their contents API (`/api/v1`).

Same shape as GitHub's: `GET /repos/{owner}/{repo}/contents/{filepath}?ref=` gives the blob `sha`, a
`PUT` with it writes. A stale `sha` is answered 422 "sha does not match" by Gitea's
`handleCreateOrUpdateFileError`, and 409 by newer Forgejo releases (16.x lists 409 for this PUT); both
mean "re-read". The token goes in `Authorization: token …`; commit lists take `limit`.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

from cutover.githost.base import escaped
from cutover.githost.contents import ContentsApi


def default_api(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/api/v1"


class Gitea(ContentsApi):
    name = "gitea"
    history_limit_param = "limit"
    archive = "archive/{ref}.tar.gz"
    branch_ref = "{root}/branches/{branch}"
    api_root = staticmethod(default_api)

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Accept": "application/json", **({"Authorization": f"token {token}"} if token else {})}

    async def _branch_from_base(self, branch: str) -> None:
        """Create `branch` from the base head; a leftover one (no open request uses it) is made anew."""
        branches = f"{self.root}/branches"
        existing = await self._answer("GET", f"{branches}/{escaped(branch)}",
                                      what=f"look for branch {branch}")  # under the whole-answer deadline
        if existing.status_code == 200:
            await self.call("DELETE", f"{branches}/{escaped(branch)}", what=f"delete leftover branch {branch}")
        await self.call("POST", branches, json={"new_branch_name": branch, "old_branch_name": self.branch},
                        what=f"create branch {branch}")

    def stale(self, response: httpx.Response) -> bool:
        return response.status_code == 409 or (response.status_code == 422 and "sha does not match" in
                                                response.text.lower())
