# syntax=docker/dockerfile:1
# gitm-tui in a container: the README's quick start in an image, nothing more
# (docs/container.md). tests/test_container.py checks that the one RUN below is the README's
# install command and that the entry point is the console script the suite runs.
#
#   docker build -t gitm-tui .                                        # CPU (the default)
#   docker build --build-arg EXTRAS='[nvidia]' -t gitm-tui:nvidia .   # + CUPTI, for `capture`
#   docker build --build-arg BASE=… --build-arg EXTRAS='[amd]' -t gitm-tui:rocm .
#
# BASE: any image with python3 >= 3.10 and its venv module (the official python images have
# both; nvidia/cuda and rocm/dev images have neither: docs/container.md names bases that work).
ARG BASE=python:3.11.11-slim-bookworm
FROM ${BASE}

# an extra of pyproject.toml, brackets included: '[nvidia]', '[amd]', '[torch]', '[otlp]'
ARG EXTRAS=""

# One volume, /data, holds what gitm-tui writes: the run store (GITM_SCRATCH) and numba's
# compiled kernels (NUMBA_CACHE_DIR: a second run starts without compiling). It is also the
# working directory, so `-v "$PWD:/data"` lets `analyze` read your traces and write beside them.
# NVIDIA_DRIVER_CAPABILITIES: with `--gpus`, the NVIDIA Container Toolkit then mounts the
# driver's NVML (utility) and CUDA (compute, for CUPTI) libraries; unset, it mounts only NVML.
ENV GITM_SCRATCH=/data/.gitm-tui \
    NUMBA_CACHE_DIR=/data/.gitm-tui/numba-cache \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# not root: 65534 is "nobody" in Debian and Ubuntu images alike (no user to create). Set before
# the two WORKDIRs, which BuildKit (Docker's builder since 23.0) then creates owned by it.
USER 65534:65534
WORKDIR /data
WORKDIR /opt/gitm-tui
COPY --chown=65534:65534 . .
RUN python3 -m venv .venv && .venv/bin/pip install ".${EXTRAS}"

VOLUME ["/data"]
WORKDIR /data
ENTRYPOINT ["/opt/gitm-tui/.venv/bin/gitm-tui"]
