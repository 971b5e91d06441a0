# deploy/deploy.mk — container images, the local compose cluster and the
# offline manifest checks. The top-level Makefile includes it
# (`include deploy/deploy.mk`) and provides GO and SHELL.
#
#   make image               static ctxd + the FROM-scratch image $(CTXD_IMAGE)
#   make image-s3            the S3-compatible test server image (versitygw)
#   make compose-up          3-node cluster + S3 on 127.0.0.1 (deploy/compose)
#   make compose-down        stop it and delete its volumes
#   make compose-e2e         end-to-end test; prints SKIP without a Docker engine
#   make validate-manifests  strict decoding and consistency of deploy/ (also part of make test)

GO              ?= go
DEPLOY_BIN      ?= bin/linux
CTXD_IMAGE      ?= ctxtier/ctxd:dev
S3_IMAGE        ?= ctxtier/versitygw:v1.8.0
COMPOSE         ?= docker-compose
COMPOSE_PROJECT ?= ctxtier
COMPOSE_FILE_CLUSTER := deploy/compose/docker-compose.yml

.PHONY: image image-s3 compose-up compose-down compose-e2e validate-manifests

image: ## build a static ctxd and the FROM-scratch image $(CTXD_IMAGE)
	@mkdir -p $(DEPLOY_BIN)
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(DEPLOY_BIN)/ctxd ./cmd/ctxd
	CTXD_BIN=$(DEPLOY_BIN)/ctxd CTXD_IMAGE=$(CTXD_IMAGE) deploy/docker/build.sh ctxd

image-s3: ## build the S3-compatible test server image (versitygw; first build takes minutes, then cached)
	S3_IMAGE=$(S3_IMAGE) deploy/docker/build.sh versitygw

compose-up: image image-s3 ## start the local 3-node cluster and S3 server (ports on 127.0.0.1)
	CTXD_IMAGE=$(CTXD_IMAGE) S3_IMAGE=$(S3_IMAGE) COMPOSE="$(COMPOSE)" \
	  deploy/compose/up.sh $(COMPOSE_PROJECT) $(COMPOSE_FILE_CLUSTER)

compose-down: ## stop the local cluster and delete its volumes
	CTXD_IMAGE=$(CTXD_IMAGE) S3_IMAGE=$(S3_IMAGE) \
	  $(COMPOSE) -p $(COMPOSE_PROJECT) -f $(COMPOSE_FILE_CLUSTER) down -v --remove-orphans

compose-e2e: ## end-to-end test of the image and the compose cluster (SKIP without Docker)
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory image image-s3; fi
	CTXD_IMAGE=$(CTXD_IMAGE) S3_IMAGE=$(S3_IMAGE) deploy/compose/e2e.sh

validate-manifests: ## check deploy/ offline: k8s manifests, compose files, Dockerfile, dashboard
	$(GO) test -count=1 ./deploy/...
