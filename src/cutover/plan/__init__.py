"""The plan file (docs/plan.md): its model (`plan.model`), read and validated section by section (`plan.reader`).

`load()` reads a YAML file and returns one or more `Plan`s; any problem raises `InvalidInput` whose message names
the field path, what was expected and what was found, so exit 2 says exactly what to fix. Called by the CLI before
anything touches a cluster, a Git host or Slack. What the rest of the house uses is named here.
"""

from __future__ import annotations

from cutover.plan.model import (
    API_VERSION,
    DEFAULT_PATH,
    ENGINES,
    GIT_MODES,
    KIND,
    LOG_LEVELS,
    PROOFS,
    PROVIDERS,
    PUBLIC_HOSTS,
    SOURCES,
    STRATEGIES,
    ArgoCD,
    Backend,
    Fitness,
    GitAuthor,
    GitDocument,
    GitSettings,
    Handoff,
    Plan,
    ServiceRef,
    Slack,
    SourceFormat,
    Verify,
    Workload,
    label_problem,
    parse_duration,
)
from cutover.plan.reader import MAX_PLAN, load, parse, resolve_path

__all__ = ["API_VERSION", "DEFAULT_PATH", "ENGINES", "GIT_MODES", "KIND", "LOG_LEVELS", "MAX_PLAN", "PROOFS",
           "PROVIDERS", "PUBLIC_HOSTS", "SOURCES", "STRATEGIES", "ArgoCD", "Backend", "Fitness", "GitAuthor",
           "GitDocument", "GitSettings", "Handoff", "Plan", "ServiceRef", "Slack", "SourceFormat", "Verify",
           "Workload", "label_problem", "load", "parse", "parse_duration", "resolve_path"]
