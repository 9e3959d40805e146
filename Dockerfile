# syntax=docker/dockerfile:1
# terdut-server as a static binary on a distroless base: no shell, no package manager,
# CA certificates for the OIDC issuer and Postgres over TLS, and user 65532 (nonroot).
#
#   docker build -t terdut-server .      (or: make image)
#
# With no registry, `make image` (scripts/server-image.sh) builds this same file with the
# classic builder FROM bases it makes on this machine: BUILDER_IMAGE a static shell,
# RUNTIME_IMAGE a root filesystem with only CA certificates, time zones and the nonroot
# user, and PREBUILT=1 with a context holding the binary it built (CGO_ENABLED=0, the
# flags below). The image's contract is the same either way.
ARG BUILDER_IMAGE=golang:1.26
ARG RUNTIME_IMAGE=gcr.io/distroless/static:nonroot

FROM ${BUILDER_IMAGE} AS build
ARG PREBUILT=
# What terdut-server --version and terdut_build_info report, such as
# --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD).
ARG VERSION=devel
ARG REVISION=unknown
WORKDIR /src
# Modules first, so that a change to the code does not download them again.
COPY go.mod go.sum ./
RUN [ -n "$PREBUILT" ] || go mod download
COPY . .
# The binary is /terdut-server (the entrypoint); the link puts it on PATH as well, so that
# `kubectl exec deploy/terdut-server -- terdut-server bootstrap reset` works.
RUN mkdir -p /out/usr/local/bin \
 && if [ -n "$PREBUILT" ]; then cp terdut-server /out/terdut-server; \
    else CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/terdut-server ./cmd/terdut-server; fi \
 && ln -s /terdut-server /out/usr/local/bin/terdut-server

FROM ${RUNTIME_IMAGE}
COPY --from=build /out/ /
USER 65532:65532
# 8080: --listen, people; 8081: --operator-listen, the operator, when it is set.
EXPOSE 8080 8081
ENTRYPOINT ["/terdut-server"]
