package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"

	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
	"github.com/ctxtier/ctxtier/internal/clustersecret"
)

// secretFlags adds the cluster-secret flags to fs: --cluster-secret
// (default $CTXTIER_CLUSTER_SECRET), --cluster-secret-file (default
// $CTXTIER_CLUSTER_SECRET_FILE) and --token, the older name (default
// $CTXTIER_CLUSTER_TOKEN). The returned function reads the secret after
// parsing: the first of those that is set; "" when none is.
func secretFlags(fs *flag.FlagSet) func() (string, error) {
	secret := fs.String("cluster-secret", os.Getenv("CTXTIER_CLUSTER_SECRET"), "the cluster secret ctxd printed when the cluster formed (its DATA_DIR/cluster.secret)")
	file := fs.String("cluster-secret-file", os.Getenv("CTXTIER_CLUSTER_SECRET_FILE"), "file holding the cluster secret (mode 0600), e.g. a node's DATA_DIR/cluster.secret")
	token := fs.String("token", os.Getenv("CTXTIER_CLUSTER_TOKEN"), "older name of --cluster-secret")
	return func() (string, error) {
		switch {
		case *secret != "":
			return *secret, nil
		case *token != "":
			return *token, nil
		case *file != "":
			return clustersecret.Load(*file)
		}
		return "", nil
	}
}

// remoteKeys manages the cluster's replicated access keys through a node's
// cluster API.
type remoteKeys struct{ c *clusterapi.Client }

func (r remoteKeys) Create(ctx context.Context, namespaces []string, description string) (credential.Credential, error) {
	k, err := r.c.CreateKey(ctx, namespaces, description)
	if err != nil {
		return credential.Credential{}, err
	}
	return credential.Credential{AccessKeyID: k.AccessKeyID, Secret: k.SecretAccessKey, Namespaces: k.Namespaces, Description: k.Description, Created: k.Created}, nil
}

func (r remoteKeys) List(ctx context.Context) ([]credential.Credential, error) {
	keys, err := r.c.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]credential.Credential, 0, len(keys))
	for _, k := range keys {
		out = append(out, credential.Credential{AccessKeyID: k.AccessKeyID, Namespaces: k.Namespaces, Description: k.Description, Created: k.Created})
	}
	return out, nil
}

func (r remoteKeys) Revoke(ctx context.Context, id string) error { return r.c.RevokeKey(ctx, id) }

// tlsFlag adds --tls-ca (default $CTXTIER_TLS_CA): the CA bundle that a ctxd
// run with --tls-clients presents its certificate from. The returned
// function gives the client TLS configuration after parsing (nil: plain
// http).
func tlsFlag(fs *flag.FlagSet) func() (*tls.Config, error) {
	ca := fs.String("tls-ca", os.Getenv("CTXTIER_TLS_CA"), "PEM CA bundle for a ctxd run with --tls-clients: talk https and trust it")
	return func() (*tls.Config, error) {
		if *ca == "" {
			return nil, nil
		}
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return nil, fmt.Errorf("tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls-ca %s: no PEM certificate", *ca)
		}
		return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}, nil
	}
}
