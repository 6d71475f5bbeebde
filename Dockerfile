# The probe image: fio, the fioprobe package and its job profiles, run as a non-root user.
# The CronJobs in manifests/ run `fioprobe run --config /etc/fioprobe/config.yaml` in it with
# a read-only root filesystem; nothing here writes outside /probe and /tmp at run time.
# Build it with `make image` (podman or docker; IMAGE=name:tag), push it, and set `image` in
# manifests/config.libsonnet or the chart's values to where you pushed it (its tag defaults to
# fioprobe's version, fioprobe.__version__). README, "Installing in a cluster".

# Build stage: the package in a venv at /opt/fioprobe with the exact pins of pyproject.toml.
# pip and setuptools stay here: the runtime never installs anything, and a smaller image has
# fewer packages to patch.
FROM debian:12-slim AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml /src/
COPY exporter/ /src/exporter/
RUN python3 -m venv /opt/fioprobe \
    && /opt/fioprobe/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/fioprobe/bin/pip uninstall -y --disable-pip-version-check pip setuptools \
    && rm -f /opt/fioprobe/bin/activate*

# Runtime: fio from Debian (3.33, as in the tests) and the same python3 the venv was made with
# (same base image, so the venv's /usr/bin/python3 link holds).
FROM debian:12-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends fio python3 ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/fioprobe /opt/fioprobe

# The runner finds the profiles here ($FIOPROBE_JOBS_DIR; /usr/share/fioprobe/jobs is also
# its fallback when the package is not a checkout).
COPY jobs/ /usr/share/fioprobe/jobs/

# No bytecode writes (the root filesystem is read-only in the pod); unbuffered logs.
ENV PATH=/opt/fioprobe/bin:$PATH \
    FIOPROBE_JOBS_DIR=/usr/share/fioprobe/jobs \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Numeric user, so that the kubelet can check runAsNonRoot; the manifests use the same ID
# (probeUser in manifests/lib/defaults.libsonnet) and fsGroup for the probe PVC.
RUN groupadd --gid 65532 fioprobe \
    && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin fioprobe
USER 65532:65532
WORKDIR /tmp
CMD ["fioprobe", "--help"]
