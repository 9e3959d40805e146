# terdut-server: `make run` starts a working server, `make test` runs every test.
# Each target is a few lines of plain commands; add new ones to .PHONY.

.PHONY: run test lint

SHELL := bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go

# Settings of `make run`, unless the environment sets them: listen on 127.0.0.1:8080 (this
# machine only: with no operator token, the claim is open to local clients), be reached at
# http://localhost:<that port>. Every other setting comes from its TERDUT_* variable.
TERDUT_LISTEN ?= 127.0.0.1:8080
TERDUT_PUBLIC_URL ?= http://localhost:$(lastword $(subst :, ,$(TERDUT_LISTEN)))
# Extra flags for the server, e.g. make run ARGS='--log-level debug'.
ARGS ?=

# run builds terdut-server and serves until Ctrl-C. Without TERDUT_DATABASE_URL (or
# TERDUT_DATABASE_URL_FILE) it uses a local development Postgres under .dev/ on port 54329,
# started by scripts/devdb.sh (stop it with `scripts/devdb.sh stop`).
run: export TERDUT_LISTEN := $(TERDUT_LISTEN)
run: export TERDUT_PUBLIC_URL := $(TERDUT_PUBLIC_URL)
run:
	@if [[ -z "$${TERDUT_DATABASE_URL:-}" && -z "$${TERDUT_DATABASE_URL_FILE:-}" ]]; then \
		scripts/devdb.sh start; \
		shown=$$(scripts/devdb.sh url); \
		export TERDUT_DATABASE_URL="$${shown/:\*\*\*@/@}" TERDUT_DATABASE_PASSWORD_FILE="$(CURDIR)/.dev/password"; \
		echo "make run: using the development database $$shown"; \
	fi; \
	$(GO) build -o bin/terdut-server ./cmd/terdut-server; \
	exec bin/terdut-server $(ARGS)

# test runs every test with the race detector. The tests find Postgres themselves (see
# docs/developing.md#tests): nothing to start by hand. The tests behind a connection pooler run
# a real PgBouncer (test/harness/pgbouncertest): scripts/ensure-pgbouncer.sh installs Debian's first
# when it is missing (as root), or says how.
test:
	scripts/ensure-pgbouncer.sh
	$(GO) test -race -count=1 -timeout 15m ./...

# lint runs go vet and staticcheck (a Go tool of this module: see go.mod), and go vet on the
# interop module.
lint:
	$(GO) vet ./...
	$(GO) vet -tags browser ./test/browsertest/
	$(GO) vet -tags image ./test/e2e/image/
	$(GO) vet -tags kube ./...
	$(GO) vet -tags chart ./test/harness/helmtest/
	$(GO) vet -tags node ./test/harness/helmtest/ ./test/harness/nodetest/...
	$(GO) tool staticcheck ./...
	cd test/interop && $(GO) vet ./...

# interop signs people in to the real API through identity-provider products: Dex in-process
# and Ory Hydra as a local process (see test/interop/README.md). test/interop/ is a Go module of its own,
# so their dependencies stay out of this one. The first run builds Hydra (minutes) into
# $$TERDUT_INTEROP_CACHE or the user's cache directory; later runs reuse it. The build runs
# in hydra's TestMain, under go test's timeout: on a busy machine it took 28 minutes.
.PHONY: interop
interop:
	cd test/interop && $(GO) test -race -count=1 -timeout 60m ./...

# image builds the server's image IMAGE from the Dockerfile. With the Dockerfile's bases in
# the engine (or TERDUT_IMAGE_OFFLINE=0), as it is; otherwise from bases made on this machine
# with no registry (scripts/server-image.sh). Needs a Docker engine: scripts/docker-engine.sh
# starts one. The image's end-to-end test: make image-test.
IMAGE ?= terdut-server:dev
.PHONY: image image-test
image:
	scripts/server-image.sh $(IMAGE)

# image-test runs the image IMAGE as deploy/kubernetes/terdut-server.yaml runs it, against a
# PostgreSQL container (TERDUT_TEST_POSTGRES_IMAGE, default postgres:15-alpine).
image-test:
	TERDUT_TEST_SERVER_IMAGE=$(IMAGE) $(GO) test -race -count=1 -tags image -timeout 10m -v ./test/e2e/image/

# build makes a static binary at bin/terdut-server, stamped with VERSION and REVISION (what
# terdut-server --version and the terdut_build_info metric report).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
.PHONY: build
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-X main.version=$(VERSION) -X main.revision=$(REVISION)' \
		-o bin/terdut-server ./cmd/terdut-server

# fuzz runs each go test -fuzz target briefly: the operator token file parser, request
# decoding, cookies and Bearer tokens through the real handler over a real store, the
# hand-written answer of GET /api/me against encoding/json's, and the webhook's hand-written
# decoder against json.Unmarshal (cheap: 50,000 inputs). Each worker process starts
# its own Postgres, so the budget is a count of inputs, not seconds.
FUZZ_INPUTS ?= 3000x
.PHONY: fuzz
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20000x ./internal/optoken/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZ_INPUTS) -parallel 1 ./internal/opjwt/
	for target in FuzzDecodeRequest FuzzCookie FuzzBearer FuzzMeJSON; do \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZ_INPUTS) -parallel 1 ./internal/api/; \
	done
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeNotification$$' -fuzztime 50000x -parallel 1 ./internal/api/

# e2e runs the tests that drive a real headless Chromium (test/browsertest/, behind the build tag
# "browser" so that `make test` needs no browser). scripts/ensure-chromium.sh installs
# Debian's chromium first when it is missing. The end-to-end tests of real processes (test/e2e/)
# run in `make test` too.
.PHONY: e2e
e2e:
	scripts/ensure-chromium.sh
	$(GO) test -race -count=1 -tags browser ./test/browsertest/ ./test/e2e/...

# failover runs the Patroni fault suite (behind the build tag "patroni", so that `make test`
# needs no Patroni): a 3-member Patroni cluster in strict synchronous mode with etcd and
# HAProxy, all on 127.0.0.1 (test/harness/patronitest), and terdut-server replicas on it both ways
# a Zalando/Spilo install is reached, through a killed leader, its rejoin by pg_rewind, a
# switchover, the leader cut off from etcd, etcd down (without Patroni's failsafe_mode, then
# paused and restarted with it) and a rolling restart (test/faults/), people signing in at the
# default sign-in limit throughout. It prints Patroni's time to a writable leader and
# terdut-server's extra time per fault.
# TestPatroniPooler kills the leader once more with terdut-server behind PgBouncer in
# transaction mode (as Zalando's pooler) in front of HAProxy. Each ends with the subtest
# "incidents: leader killed mid-delivery": a real Alertmanager (built once per machine by
# test/harness/amtest) delivers 200 alerts in 20 groups to a terdut-server process while the
# leader is killed; every alert must be stored once, every resolution applied, the webhook
# never answer 4xx.
# scripts/ensure-patroni.sh first installs Debian's patroni, etcd and haproxy when they are
# missing (as root), or says how to, and scripts/ensure-pgbouncer.sh pgbouncer. About 7 minutes.
.PHONY: failover
failover:
	scripts/ensure-patroni.sh
	scripts/ensure-pgbouncer.sh
	$(GO) test -race -count=1 -tags patroni -p 1 -timeout 20m -v -run '^(TestCluster|TestPatroni|TestPatroniPooler)$$' ./test/harness/patronitest/ ./test/faults/

# kube runs the Kubernetes suite (behind the build tag "kube", so that `make test` needs no
# etcd): the real kube-apiserver of k8s.io/kubernetes over Debian's etcd, on 127.0.0.1
# (test/harness/kubetest), and against it the operator's service-account identity on the layouts
# clusters have, TokenReview, the example manifests applied with strict validation and their
# RBAC, and terdut-operator's recovery of a lost claim. scripts/ensure-kube.sh first installs
# etcd when it is missing (as root). The first run on a machine builds kube-apiserver into
# $$TERDUT_KUBE_CACHE or the user's cache directory (about 6 minutes on two cores); later
# runs reuse it.
.PHONY: kube
kube:
	scripts/ensure-kube.sh
	$(GO) test -race -count=1 -tags kube -timeout 30m -run '^TestKube' ./test/harness/kubetest/ ./cmd/terdut-server/ ./client/ ./docs/

# chart checks the Helm chart deploy/helm/terdut-server (behind the build tag "chart"): helm lint
# --strict with every preset of its ci/, the schema's refusals, what each preset renders,
# deploy/kubernetes equal to the chart's renderings, every preset applied with strict field
# validation to the real kube-apiserver (test/harness/kubetest) beside the Gateway API and Prometheus
# Operator CRDs, helm install, upgrade and rollback there, and the alerts through promtool check
# rules and test rules. helm, promtool and controller-gen are built from test/harness/helmtest/helmbin
# (a module of its own) into $$TERDUT_HELM_CACHE or the user's cache directory by the first run
# (minutes); later runs reuse them. TERDUT_CHART_UPDATE=1 make chart rewrites deploy/kubernetes's
# renderings from the chart.
.PHONY: chart
chart:
	scripts/ensure-kube.sh
	$(GO) test -race -count=1 -tags chart -timeout 45m ./test/harness/helmtest/

# node installs the chart on a real single-node cluster (test/harness/nodetest, behind the build tag
# "node"): the control plane, the kubelet and kube-proxy built from k8s.io/kubernetes,
# Debian's containerd, runc and CNI bridge, kube-router's policy firewall, and the server's own
# image (built here and imported, no registry): the claim and the reset from a pod playing
# terdut-operator with its projected token, the NetworkPolicies, a rolling upgrade, the
# kubelet's token rotation. Root only; about 10 minutes warm, most of it waiting for the
# kubelet to rotate the token. The first run builds the node's programs (25-30 minutes), under
# the same timeout.
NODE_IMAGE ?= terdut-server:node
NODE_ARCHIVE ?= $(or $(TMPDIR),/tmp)/terdut-server-node-image.tar
.PHONY: node
node:
	scripts/ensure-node.sh
	scripts/node-image.sh $(NODE_IMAGE) $(NODE_ARCHIVE)
	TERDUT_NODE_SERVER_IMAGE=$(NODE_ARCHIVE) TERDUT_NODE_SERVER_REF=$(NODE_IMAGE) \
		$(GO) test -race -count=1 -tags node -p 1 -timeout 70m ./test/harness/nodetest/... ./test/harness/helmtest/

# bench measures the gate's cost, API-key requests against pgbench and sign-ins during a
# contested claim, each as a ratio to a baseline taken in the same run, on a throwaway
# Postgres cluster of its own (see bench/README.md), and API-key requests behind PgBouncer in
# transaction mode against the floor behind it (docs/pooler.md), and the same endpoints at a thousand
# people and at a million (the scale side), the incident domain's at a thousand alert occurrences and
# at a million (its incident half, scale-incidents), and Alertmanager's webhook against the floor's
# (the ingest side). It prints a table and writes the same figures to
# bench/out/results.json; a missed goal is reported, not an error. About 20 minutes.
.PHONY: bench
# SIDES names the sides to measure, comma-separated (gate, apikey, contest, flood, pooler,
# scale, scale-incidents, ingest), such as make bench SIDES=pooler; empty: every side.
# SIDES=scale-incidents takes about 7.5 minutes.
SIDES ?=
bench:
	TERDUT_BENCH_SIDES=$(SIDES) $(GO) test -run '^$$' -bench '^BenchmarkReport$$' -benchtime 1x -count 1 -timeout 30m ./bench

# bench-scale runs only bench's scale side: the endpoints at a thousand people and at a
# million, then the incident domain's at a thousand alert occurrences and at a million (all
# bulk-loaded), side by side; it writes bench/out/scale.json. About 9 minutes.
.PHONY: bench-scale
bench-scale:
	$(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -count 1 -timeout 30m ./bench
