# cutover: small, non-root, and happy with a read-only root filesystem (only /tmp needs to be writable,
# e.g. an emptyDir; nothing else is written at run time).
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir --prefix=/install . \
 && find /install -name '__pycache__' -prune -exec rm -rf {} + \
 && python -m compileall -q /install

FROM python:3.11-slim
# git: the plain-git provider pushes with it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin cutover
COPY --from=build /install /usr/local
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
USER 65532:65532
ENTRYPOINT ["cutover"]
CMD ["--help"]
