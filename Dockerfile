# The krafty operator image: Python, the pinned dependencies, the operator.
# Build from the repository root:  docker build -t krafty/operator:dev .
FROM debian:bookworm-slim AS build
ARG PIP_INDEX_URL=""
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY operator/requirements.txt /build/requirements.txt
RUN python3 -m venv /opt/krafty \
 && /opt/krafty/bin/pip install --no-cache-dir ${PIP_INDEX_URL:+--index-url "$PIP_INDEX_URL"} -r /build/requirements.txt

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1001 krafty \
 && useradd --uid 1001 --gid 1001 --no-create-home --shell /usr/sbin/nologin krafty
COPY --from=build /opt/krafty /opt/krafty
# The operator package is pure Python: on the path, no packaging step needed.
COPY operator/src/krafty /opt/krafty/app/krafty
# glibc's malloc gives each thread that allocates an arena of its own (up to eight per core), each holding
# memory it freed: two serve the operator's threads (the GIL keeps most allocations in turn anyway).
ENV PATH=/opt/krafty/bin:$PATH PYTHONPATH=/opt/krafty/app PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    MALLOC_ARENA_MAX=2
USER 1001:1001
EXPOSE 8080 8081
ENTRYPOINT ["python3", "-m", "krafty.runtime.main"]
