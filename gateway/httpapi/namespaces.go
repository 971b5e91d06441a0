package httpapi

import (
	"fmt"
	"net/http"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/ctxstore/credential"
	"github.com/ctxtier/ctxtier/gateway/httpapi/httpwire"
)

// maxNamespaceBody bounds a namespace definition's JSON.
const maxNamespaceBody = 64 << 10

// redact hides the tenant salt: knowing it lets a caller compute (and probe)
// another tenant's keys, so it goes in on create and never comes back out.
func redact(ns block.Namespace) block.Namespace {
	ns.TenantSalt = ""
	return ns
}

// createNamespace adds a namespace: 201 when new, 200 when an identical
// definition already existed, 409 NamespaceExists when a different one does.
func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request) error {
	var ns block.Namespace
	if r.ContentLength > maxNamespaceBody {
		return fmt.Errorf("%w: namespace definition over %d bytes", block.ErrTooLarge, maxNamespaceBody)
	}
	if err := httpwire.DecodeJSONBody(http.MaxBytesReader(w, r.Body, maxNamespaceBody), &ns); err != nil {
		return bodyErr(err)
	}
	if !allows(r.Context(), ns.Name) {
		// Before any look at the catalog: NamespaceExists would reveal a
		// namespace outside the key's scope.
		return denied(ns.Name)
	}
	_, existed := s.store.Namespace(ns.Name)
	if err := s.store.CreateNamespace(r.Context(), ns); err != nil {
		return err
	}
	got, err := s.store.Namespace(ns.Name)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if existed == nil {
		status = http.StatusOK
	}
	return writeJSON(w, status, redact(got))
}

// listNamespaces lists the namespaces the request's key allows (all of
// them when authentication is off).
func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request) error {
	all := s.store.Namespaces()
	list := make([]block.Namespace, 0, len(all))
	for _, ns := range all {
		if allows(r.Context(), ns.Name) {
			list = append(list, redact(ns))
		}
	}
	return writeJSON(w, http.StatusOK, httpwire.NamespaceList{Namespaces: list})
}

func (s *Server) getNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.store.Namespace(r.PathValue("ns"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.status(ns))
}

// status is ns's definition (salt redacted) with this node's usage.
func (s *Server) status(ns block.Namespace) httpwire.NamespaceStatus {
	st := httpwire.NamespaceStatus{Namespace: redact(ns)}
	if s.usage != nil {
		st.Usage = map[block.Tier]int64{}
		for tier, byNS := range s.usage() {
			st.Usage[tier] = byNS[ns.Name]
		}
	}
	return st
}

// setQuota replaces a namespace's quotas (an absent tier is 0, unlimited).
// With authentication on it needs an operator's key (scoped to "*"): a
// tenant must not raise its own quota.
func (s *Server) setQuota(w http.ResponseWriter, r *http.Request) error {
	if c, ok := identity(r.Context()); ok && !c.AllowsAll() {
		return fmt.Errorf("%w: setting a quota needs an access key scoped to %q", block.ErrPermissionDenied, credential.ScopeAll)
	}
	var q block.Quota
	if err := httpwire.DecodeJSONBody(http.MaxBytesReader(w, r.Body, maxNamespaceBody), &q); err != nil {
		return bodyErr(err)
	}
	if err := q.Validate(); err != nil {
		return err
	}
	ns, err := s.store.Namespace(r.PathValue("ns"))
	if err != nil {
		return err
	}
	ns.Quota = q
	if err := s.store.UpdateNamespace(r.Context(), ns); err != nil {
		return err
	}
	if ns, err = s.store.Namespace(ns.Name); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, s.status(ns))
}

// readyz answers 200 when the readiness check passes, 503 Unavailable otherwise.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) error {
	if s.ready != nil {
		if err := s.ready(); err != nil {
			return fmt.Errorf("%w: not ready: %v", block.ErrUnavailable, err)
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
	return nil
}

// endSession ends an agent session of the namespace: the blocks put with
// it lose their retain windows (ctxstore.Store.ReleaseSession).
func (s *Server) endSession(w http.ResponseWriter, r *http.Request) error {
	id, err := httpwire.ParseSession(r.PathValue("session"))
	if err != nil {
		return err
	}
	n, err := s.store.ReleaseSession(r.Context(), r.PathValue("ns"), id)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, httpwire.EndSessionResponse{Released: n})
}
