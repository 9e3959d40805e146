# syntax=docker/dockerfile:1
# terdut-server as a static binary on a distroless base: no shell, no package manager,
# CA certificates for the OIDC issuer and Postgres over TLS, and user 65532 (nonroot).
#
#   docker build -t terdut-server .

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a change to the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The binary is /terdut-server (the entrypoint); the link puts it on PATH as well, so that
# `kubectl exec deploy/terdut-server -- terdut-server bootstrap reset` works.
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/terdut-server ./cmd/terdut-server \
 && mkdir -p /out/usr/local/bin \
 && ln -s /terdut-server /out/usr/local/bin/terdut-server

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/ /
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/terdut-server"]
