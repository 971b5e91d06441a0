# Local multi-node cluster (scripts/cluster.sh, docs/cluster.md). Included by
# the Makefile; uses its GO and BIN.
.PHONY: cluster cluster-stop cluster-status cluster-scale cluster-clean bench-cluster

cluster: build ## start a 3-node local cluster (127.0.0.1 ports 7410+, data in ./cluster-data)
	NO_BUILD=1 BIN=$(BIN) scripts/cluster.sh start

cluster-stop: ## stop the local cluster (its data stays in ./cluster-data)
	BIN=$(BIN) scripts/cluster.sh stop

cluster-status: ## ctxctl cluster status against the local cluster
	BIN=$(BIN) scripts/cluster.sh status

cluster-scale: build ## resize the local cluster: make cluster-scale N=5 (3..9)
	NO_BUILD=1 BIN=$(BIN) scripts/cluster.sh scale $(N)

cluster-clean: ## stop the local cluster and delete ./cluster-data
	BIN=$(BIN) scripts/cluster.sh clean

bench-cluster: build ## ctxbench cluster --start: RS(2,1) vs one copy and index commits/s on 3 fresh ctxd processes (ARGS for more flags)
	$(BIN)/ctxbench cluster --start --ctxd $(BIN)/ctxd $(ARGS)
