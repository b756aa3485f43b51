# refundd's container image: two static binaries (refundd, and refundctl
# for backups and the health check) on an empty base, run as a non-root
# user, the journal on a volume. docs/INSTALL.md says how to run it.
#
#   podman build -t refundd .          (or docker build)
#   podman run -p 8080:8080 -v refundd-data:/data refundd
#
# GO_IMAGE is any image with Go 1.26 and a shell; scripts/check-image
# passes one it makes from the machine's own Go where no registry is
# reachable.
ARG GO_IMAGE=golang:1.26-bookworm

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is stamped into the binaries (internal/version); without it they
# report the module's build information.
ARG VERSION=
# Static (no cgo, so no libc), trimmed paths; vcs information is left out
# because .git is not in the build context (.dockerignore).
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -X github.com/refundd/refundd/internal/version.stamped=${VERSION}" \
      -o /out/ ./cmd/refundd ./cmd/refundctl \
 && mkdir -p /out/data

# No shell, no package manager, no libc: the binaries, CA certificates for
# calling WeChat Pay over TLS, and the data directory owned by the user.
FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/refundd /out/refundctl /
COPY --from=build --chown=65532:65532 /out/data /data
# 65532 is the conventional "nonroot" id of distroless images; numeric, as
# there is no /etc/passwd to name it.
USER 65532:65532
ENV REFUNDD_LISTEN=0.0.0.0:8080 \
    REFUNDD_DATA=/data \
    REFUNDD_LOG_FORMAT=json
VOLUME /data
EXPOSE 8080
# Docker runs this; Kubernetes ignores it and uses its own probes
# (httpGet /healthz for liveness, /readyz for readiness: docs/INSTALL.md).
# Podman keeps it only with --format docker.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["/refundctl", "probe", "--timeout", "4s", "http://127.0.0.1:8080/readyz"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/refundd"]
