// Package image tests terdut-server's container image end to end, as
// deploy/kubernetes/terdut-server.yaml runs it: read-only root filesystem, user 65532, no
// capabilities, settings from TERDUT_* variables and secrets from *_FILE files mounted
// read-only, two replicas sharing a PostgreSQL container on a Docker network of the test's
// own, ports published on 127.0.0.1 only.
//
// The tests are behind the build tag "image" and need TERDUT_TEST_SERVER_IMAGE (the image
// under test, e.g. terdut-server:dev from `make image`) and a Docker engine holding it and
// the PostgreSQL image TERDUT_TEST_POSTGRES_IMAGE names (default postgres:15-alpine). With
// the tag, anything missing is a failure, never a skip:
//
//	make image image-test
package image
