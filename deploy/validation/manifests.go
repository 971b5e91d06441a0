package validation

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// ServiceMonitor is the subset of the Prometheus Operator's
// monitoring.coreos.com/v1 ServiceMonitor that the manifests use. It is not
// in k8s.io/api; strict decoding into it refuses any field it does not
// model, so a field added to the manifest must be added here too (with the
// operator's JSON name).
type ServiceMonitor struct {
	metav1.TypeMeta   `json:",inline"` //nolint:revive // sigs.k8s.io/yaml reads the inline option
	metav1.ObjectMeta `json:"metadata"`
	Spec              ServiceMonitorSpec `json:"spec"`
}

// ServiceMonitorSpec selects Services and says how to scrape them.
type ServiceMonitorSpec struct {
	JobLabel          string               `json:"jobLabel,omitempty"`
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector NamespaceSelector    `json:"namespaceSelector,omitempty"`
	Endpoints         []MonitorEndpoint    `json:"endpoints"`
}

// NamespaceSelector picks the namespaces the selected Services live in.
type NamespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

// MonitorEndpoint is one scrape target of a ServiceMonitor.
type MonitorEndpoint struct {
	Port          string              `json:"port,omitempty"`
	TargetPort    *intstr.IntOrString `json:"targetPort,omitempty"`
	Path          string              `json:"path,omitempty"`
	Scheme        string              `json:"scheme,omitempty"`
	Interval      string              `json:"interval,omitempty"`
	ScrapeTimeout string              `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool                `json:"honorLabels,omitempty"`
}

// Manifest is one decoded YAML document.
type Manifest struct {
	Path   string // file, relative to the root given to LoadManifests
	Index  int    // document index within the file
	Object any    // a pointer to a typed object
}

// newObject returns an empty typed object for an apiVersion and kind.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + "/" + kind {
	case "v1/Namespace":
		return &corev1.Namespace{}, nil
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "v1/Secret":
		return &corev1.Secret{}, nil
	case "v1/Service":
		return &corev1.Service{}, nil
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	case "apps/v1/StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &ServiceMonitor{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a kind these manifests are checked as", apiVersion, kind)
}

// DecodeManifest decodes one YAML document strictly: unknown or duplicate
// fields and wrong types are errors.
func DecodeManifest(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	obj, err := newObject(tm.APIVersion, tm.Kind)
	if err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// splitDocuments splits a multi-document YAML stream on "---" lines and
// drops documents that hold only comments and blank lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		meaningful := false
		for _, l := range strings.Split(cur.String(), "\n") {
			t := strings.TrimSpace(l)
			if t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, append([]byte(nil), cur.Bytes()...))
		}
		cur.Reset()
	}
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if strings.TrimRight(l, " \t\r\n") == "---" {
			flush()
			continue
		}
		cur.WriteString(l)
	}
	flush()
	return docs
}

// LoadManifests decodes every *.yaml and *.yml file under root, in path
// order.
func LoadManifests(root string) ([]Manifest, error) {
	var paths []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var out []Manifest
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		rel, _ := filepath.Rel(root, p)
		for i, doc := range splitDocuments(b) {
			obj, err := DecodeManifest(doc)
			if err != nil {
				return nil, fmt.Errorf("%s (document %d): %w", rel, i, err)
			}
			out = append(out, Manifest{Path: rel, Index: i, Object: obj})
		}
	}
	return out, nil
}

// Bundle is the set of objects that are deployed together.
type Bundle struct {
	Image           Image // the ctxd image, for its entrypoint
	Namespaces      []*corev1.Namespace
	ConfigMaps      []*corev1.ConfigMap
	Secrets         []*corev1.Secret
	Services        []*corev1.Service
	ServiceAccounts []*corev1.ServiceAccount
	StatefulSets    []*appsv1.StatefulSet
	PDBs            []*policyv1.PodDisruptionBudget
	ServiceMonitors []*ServiceMonitor
}

// NewBundle sorts decoded manifests by kind.
func NewBundle(img Image, ms []Manifest) *Bundle {
	b := &Bundle{Image: img}
	for _, m := range ms {
		switch o := m.Object.(type) {
		case *corev1.Namespace:
			b.Namespaces = append(b.Namespaces, o)
		case *corev1.ConfigMap:
			b.ConfigMaps = append(b.ConfigMaps, o)
		case *corev1.Secret:
			b.Secrets = append(b.Secrets, o)
		case *corev1.Service:
			b.Services = append(b.Services, o)
		case *corev1.ServiceAccount:
			b.ServiceAccounts = append(b.ServiceAccounts, o)
		case *appsv1.StatefulSet:
			b.StatefulSets = append(b.StatefulSets, o)
		case *policyv1.PodDisruptionBudget:
			b.PDBs = append(b.PDBs, o)
		case *ServiceMonitor:
			b.ServiceMonitors = append(b.ServiceMonitors, o)
		}
	}
	return b
}
