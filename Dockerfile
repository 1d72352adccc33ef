# cutover: small, non-root, and happy with a read-only root filesystem (only /tmp needs to be writable,
# e.g. an emptyDir; nothing else is written at run time).
#
#   docker build -t cutover .                          the default image: GitHub, GitLab, Gitea/Forgejo
#   docker build -t cutover:git --target with-git .    adds git and ssh, for `git.provider: git` (HTTPS or SSH)
#   make image                                         both, with podman, checked as the Jobs run them
#
# Size, as `make image` builds it (packaging/image.sh, on a python:3.11-slim stand-in of 153 MB made from Debian's
# packages; the official one is about 130 MB): the default image adds 64 MB to its base (the locked packages once
# packaging/prune.py has dropped what cutover never loads, the kubernetes package's generated models and APIs and
# its asyncio client among them, their byte code, and kustomize's 16 MB); with-git adds 156 MB (git and OpenSSH
# with their Debian dependencies, perl among them), hence the separate target.
# kustomize, for `git.source: kustomize` (the render check builds what ArgoCD builds): the static binary of the
# official image (kustomize.Dockerfile in kubernetes-sigs/kustomize copies it to /app/kustomize). Pin the digest
# where the image is built: --build-arg KUSTOMIZE_DIGEST=sha256:... (docker buildx imagetools inspect
# registry.k8s.io/kustomize/kustomize:v5.8.2); tests/install/test_packaging.py checks this wiring.
ARG KUSTOMIZE_DIGEST=""
# The Python base likewise: --build-arg PYTHON_DIGEST=sha256:... (the digest of python:3.11-slim where the image is
# built; no registry is reachable where this repository is tested, so none is written here).
ARG PYTHON_DIGEST=""
FROM registry.k8s.io/kustomize/kustomize:v5.8.2${KUSTOMIZE_DIGEST:+@${KUSTOMIZE_DIGEST}} AS kustomize

FROM python:3.11-slim${PYTHON_DIGEST:+@${PYTHON_DIGEST}} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
COPY packaging ./packaging
# the runtime dependencies exactly as locked, each checked against its hash; then cutover alone, built with the
# locked build backend (no build isolation, which would fetch the newest setuptools on the day of the build)
RUN pip install --no-cache-dir --require-hashes -r packaging/build.lock \
 && pip install --no-cache-dir --prefix=/install --require-hashes -r packaging/requirements.lock \
 && pip install --no-cache-dir --prefix=/install --no-deps --no-build-isolation . \
 && python packaging/prune.py /install/lib/python3.11/site-packages \
 && find /install -name '__pycache__' -prune -exec rm -rf {} + \
 && python -m compileall -q /install

# The final images carry no installer: pip (and the setuptools and wheel beside it) could fetch and run code that is
# not the locked set. /bin/sh stays (Debian's maintainer scripts and `RUN` need it): the pod policy pins the
# entrypoint and args, and no role may exec into the Jobs' pods (docs/security.md).
FROM python:3.11-slim${PYTHON_DIGEST:+@${PYTHON_DIGEST}} AS with-git
RUN apt-get update \
 && apt-get install -y --no-install-recommends git openssh-client \
 && rm -rf /var/lib/apt/lists/* \
 && python -m pip uninstall --yes --quiet pip setuptools wheel \
 && groupadd --gid 65532 cutover \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin cutover
COPY --from=build /install /usr/local
COPY --from=kustomize /app/kustomize /usr/local/bin/kustomize
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
USER 65532:65532
ENTRYPOINT ["cutover"]
CMD ["--help"]

# The default (last) stage: the hosting-API providers need no git program.
FROM python:3.11-slim${PYTHON_DIGEST:+@${PYTHON_DIGEST}}
RUN python -m pip uninstall --yes --quiet pip setuptools wheel \
 && groupadd --gid 65532 cutover \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin cutover
COPY --from=build /install /usr/local
COPY --from=kustomize /app/kustomize /usr/local/bin/kustomize
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
USER 65532:65532
ENTRYPOINT ["cutover"]
CMD ["--help"]
