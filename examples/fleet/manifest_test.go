package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kstream-go/kstream"
	"sigs.k8s.io/yaml"
)

// manifestDir holds the Kubernetes kit that deploys this example.
const manifestDir = "../../deploy/kubernetes"

// Sample values the downward API gives a pod, for resolving the StatefulSet's env.
const (
	sampleOrdinal   = 1
	sampleNamespace = "fleet-ns"
)

// stopMargin is what the termination grace period must leave beyond the close timeout and
// the HTTP server's shutdown: closing the stores and exiting.
const stopMargin = 10 * time.Second

// The manifests are decoded as kubectl decodes them (YAML to JSON, then JSON into these
// types: sigs.k8s.io/yaml), into the few fields checked here.

type objectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

type labelSelector struct {
	MatchLabels      map[string]string `json:"matchLabels"`
	MatchExpressions []any             `json:"matchExpressions"`
}

// intOrString is a Kubernetes IntOrString (a port by number or name, a count or a
// percentage) or a quantity written as a number or a string.
type intOrString struct {
	IsString bool
	Int      int64
	Str      string
}

func (v *intOrString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		v.IsString = true
		return json.Unmarshal(b, &v.Str)
	}
	return json.Unmarshal(b, &v.Int)
}

func (v intOrString) String() string {
	if v.IsString {
		return v.Str
	}
	return strconv.FormatInt(v.Int, 10)
}

type statefulSet struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Replicas            *int32        `json:"replicas"`
		ServiceName         string        `json:"serviceName"`
		PodManagementPolicy string        `json:"podManagementPolicy"`
		Selector            labelSelector `json:"selector"`
		UpdateStrategy      struct {
			Type string `json:"type"`
		} `json:"updateStrategy"`
		PVCRetention *struct {
			WhenDeleted string `json:"whenDeleted"`
			WhenScaled  string `json:"whenScaled"`
		} `json:"persistentVolumeClaimRetentionPolicy"`
		Template struct {
			Metadata objectMeta `json:"metadata"`
			Spec     podSpec    `json:"spec"`
		} `json:"template"`
		VolumeClaimTemplates []struct {
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				AccessModes []string `json:"accessModes"`
				Resources   struct {
					Requests map[string]intOrString `json:"requests"`
				} `json:"resources"`
			} `json:"spec"`
		} `json:"volumeClaimTemplates"`
	} `json:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool  `json:"runAsNonRoot"`
		RunAsUser    *int64 `json:"runAsUser"`
		FSGroup      *int64 `json:"fsGroup"`
	} `json:"securityContext"`
	Containers []container `json:"containers"`
	Volumes    []struct {
		Name string `json:"name"`
	} `json:"volumes"`
}

type container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Ports []struct {
		Name          string `json:"name"`
		ContainerPort int32  `json:"containerPort"`
	} `json:"ports"`
	Env       []envVar `json:"env"`
	EnvFrom   []any    `json:"envFrom"`
	Resources struct {
		Requests map[string]intOrString `json:"requests"`
		Limits   map[string]intOrString `json:"limits"`
	} `json:"resources"`
	ReadinessProbe  *probe `json:"readinessProbe"`
	LivenessProbe   *probe `json:"livenessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
	} `json:"securityContext"`
	VolumeMounts []struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
		ReadOnly  bool   `json:"readOnly"`
	} `json:"volumeMounts"`
}

type envVar struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `json:"fieldPath"`
		} `json:"fieldRef"`
		ResourceFieldRef *struct {
			ContainerName string       `json:"containerName"`
			Resource      string       `json:"resource"`
			Divisor       *intOrString `json:"divisor"`
		} `json:"resourceFieldRef"`
		SecretKeyRef    any `json:"secretKeyRef"`
		ConfigMapKeyRef any `json:"configMapKeyRef"`
	} `json:"valueFrom"`
}

type probe struct {
	HTTPGet *struct {
		Path string      `json:"path"`
		Port intOrString `json:"port"`
	} `json:"httpGet"`
	InitialDelaySeconds int32 `json:"initialDelaySeconds"`
	PeriodSeconds       int32 `json:"periodSeconds"`
	TimeoutSeconds      int32 `json:"timeoutSeconds"`
	FailureThreshold    int32 `json:"failureThreshold"`
}

type service struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		Type                     string            `json:"type"`
		ClusterIP                string            `json:"clusterIP"`
		PublishNotReadyAddresses bool              `json:"publishNotReadyAddresses"`
		Selector                 map[string]string `json:"selector"`
		Ports                    []struct {
			Name       string      `json:"name"`
			Port       int32       `json:"port"`
			TargetPort intOrString `json:"targetPort"`
		} `json:"ports"`
	} `json:"spec"`
}

type podDisruptionBudget struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
	Spec       struct {
		MaxUnavailable *intOrString  `json:"maxUnavailable"`
		MinAvailable   *intOrString  `json:"minAvailable"`
		Selector       labelSelector `json:"selector"`
	} `json:"spec"`
}

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// kit is the decoded directory.
type kit struct {
	files    []string // every YAML file of the directory, sorted
	sts      statefulSet
	services []service
	pdb      podDisruptionBudget
	kust     kustomization
	kustFile string
}

// loadKit decodes every YAML document of manifestDir by its kind, and fails on a kind it
// does not expect or on a missing one.
func loadKit(t *testing.T) *kit {
	t.Helper()
	k := &kit{}
	entries, err := os.ReadDir(manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	var nSts, nPDB int
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || (!strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".yml")) {
			continue
		}
		k.files = append(k.files, name)
		data, err := os.ReadFile(filepath.Join(manifestDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocuments(data) {
			var head struct {
				Kind string `json:"kind"`
			}
			if err := yaml.Unmarshal(doc, &head); err != nil {
				t.Fatalf("%s, document %d: %v", name, i+1, err)
			}
			var dst any
			switch head.Kind {
			case "StatefulSet":
				nSts++
				dst = &k.sts
			case "Service":
				k.services = append(k.services, service{})
				dst = &k.services[len(k.services)-1]
			case "PodDisruptionBudget":
				nPDB++
				dst = &k.pdb
			case "Kustomization":
				k.kustFile = name
				dst = &k.kust
			default:
				t.Fatalf("%s, document %d: unexpected kind %q", name, i+1, head.Kind)
			}
			if err := yaml.Unmarshal(doc, dst); err != nil {
				t.Fatalf("%s, document %d (%s): %v", name, i+1, head.Kind, err)
			}
		}
	}
	if nSts != 1 || nPDB != 1 || k.kustFile == "" || len(k.services) == 0 {
		t.Fatalf("%s: want one StatefulSet, one PodDisruptionBudget, one Kustomization and Services; found %d, %d, %q, %d",
			manifestDir, nSts, nPDB, k.kustFile, len(k.services))
	}
	return k
}

// splitDocuments splits a YAML stream at its "---" lines, dropping empty documents.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if strings.TrimSpace(stripComments(cur.String())) != "" {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line := sc.Text(); strings.TrimRight(line, " \t") == "---" {
			flush()
			continue
		}
		cur.Write(sc.Bytes())
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func stripComments(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// container returns the StatefulSet's one container.
func (k *kit) container(t *testing.T) *container {
	t.Helper()
	cs := k.sts.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("StatefulSet %s: %d containers, want 1", k.sts.Metadata.Name, len(cs))
	}
	return &cs[0]
}

// httpPort returns the container port named http.
func (k *kit) httpPort(t *testing.T) int32 {
	t.Helper()
	for _, p := range k.container(t).Ports {
		if p.Name == "http" {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named http", k.container(t).Name)
	return 0
}

// headless returns the headless Service.
func (k *kit) headless(t *testing.T) *service {
	t.Helper()
	var found *service
	for i := range k.services {
		if k.services[i].Spec.ClusterIP == "None" {
			if found != nil {
				t.Fatalf("two headless Services: %s and %s", found.Metadata.Name, k.services[i].Metadata.Name)
			}
			found = &k.services[i]
		}
	}
	if found == nil {
		t.Fatal("no headless Service (clusterIP: None)")
	}
	return found
}

// podName is the name of the StatefulSet's pod of ordinal sampleOrdinal.
func (k *kit) podName() string { return fmt.Sprintf("%s-%d", k.sts.Metadata.Name, sampleOrdinal) }

// resolvedEnv returns the container's environment as the kubelet builds it for the pod
// podName in sampleNamespace: downward API values substituted, then every $(VAR) of a
// value expanded from the variables defined before it.
func (k *kit) resolvedEnv(t *testing.T) map[string]string {
	t.Helper()
	c := k.container(t)
	if len(c.EnvFrom) > 0 {
		t.Fatalf("container %s: envFrom is not resolved by this test", c.Name)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("env %s is set twice", e.Name)
		}
		switch vf := e.ValueFrom; {
		case vf == nil:
			env[e.Name] = expandEnv(e.Value, env)
		case vf.FieldRef != nil:
			switch vf.FieldRef.FieldPath {
			case "metadata.name":
				env[e.Name] = k.podName()
			case "metadata.namespace":
				env[e.Name] = sampleNamespace
			default:
				t.Fatalf("env %s: fieldRef %s is not resolved by this test", e.Name, vf.FieldRef.FieldPath)
			}
		case vf.ResourceFieldRef != nil:
			rf := vf.ResourceFieldRef
			if rf.ContainerName != "" && rf.ContainerName != c.Name {
				t.Fatalf("env %s: resourceFieldRef of container %q", e.Name, rf.ContainerName)
			}
			group, res, _ := strings.Cut(rf.Resource, ".")
			var q intOrString
			var ok bool
			switch group {
			case "limits":
				q, ok = c.Resources.Limits[res]
			case "requests":
				q, ok = c.Resources.Requests[res]
			}
			if !ok || res != "memory" {
				t.Fatalf("env %s: resourceFieldRef %s: not a memory limit or request the container sets", e.Name, rf.Resource)
			}
			n := quantityBytes(t, q)
			if rf.Divisor != nil {
				n /= quantityBytes(t, *rf.Divisor)
			}
			env[e.Name] = strconv.FormatInt(n, 10)
		default:
			t.Fatalf("env %s: valueFrom is not resolved by this test", e.Name)
		}
	}
	return env
}

// expandEnv expands $(VAR) in s as Kubernetes does for container env: from the variables
// defined before, leaving an undefined reference as it is, "$$" standing for "$".
func expandEnv(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			ref := s[i : i+3+end]
			if v, ok := vars[ref[2:len(ref)-1]]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(ref)
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// quantityBytes parses a Kubernetes quantity of bytes: an integer with an optional binary
// (Ki, Mi, Gi, Ti) or decimal (k, M, G, T) suffix.
func quantityBytes(t *testing.T, q intOrString) int64 {
	t.Helper()
	if !q.IsString {
		return q.Int
	}
	m := regexp.MustCompile(`^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$`).FindStringSubmatch(q.Str)
	if m == nil {
		t.Fatalf("quantity %q: not an integer with an optional unit", q.Str)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatalf("quantity %q: %v", q.Str, err)
	}
	mult := map[string]int64{"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
		"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m[2]]
	return n * mult
}

// deref is *p for messages, "unset" for nil.
func deref[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// selects reports whether a selector of matchLabels selects a pod labelled labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false // an empty selector is either everything or nothing: neither is meant
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// targetPort resolves a Service's target port (a number or a port name) against the
// container's ports.
func (k *kit) targetPort(t *testing.T, p intOrString) int32 {
	t.Helper()
	if !p.IsString {
		return int32(p.Int)
	}
	for _, cp := range k.container(t).Ports {
		if cp.Name == p.Str {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %q is not a port of container %s", p.Str, k.container(t).Name)
	return 0
}

// The StatefulSet's environment, resolved as the kubelet resolves it for one pod and read
// by configFromEnv, gives a Config that kstream accepts and that agrees with the rest of
// the manifest: the pod name as instance id, the pod's DNS name under the headless Service
// and the container port as ApplicationServer, the state volume's mount as state
// directory, a close that fits the termination grace period, a session timeout that
// outlasts a restart, enough pods for the standbys.
func TestManifestConfig(t *testing.T) {
	k := loadKit(t)
	c := k.container(t)
	env := k.resolvedEnv(t)
	for name, v := range env {
		if strings.Contains(v, "$(") {
			t.Errorf("env %s=%q: a reference is left unresolved (defined later, or not at all)", name, v)
		}
	}
	asked := map[string]bool{}
	s, err := configFromEnv(func(name string) string { asked[name] = true; return env[name] })
	if err != nil {
		t.Fatalf("configFromEnv of the StatefulSet's env: %v", err)
	}
	for name := range env {
		if (strings.HasPrefix(name, "KSTREAM_") || strings.HasPrefix(name, "FLEET_")) && !asked[name] {
			t.Errorf("env %s is set but the application does not read it", name)
		}
	}
	if _, err := kstream.New(topology(s.InputTopic), s.Config); err != nil {
		t.Fatalf("kstream.New with the Config of the manifest: %v", err)
	}
	cfg := s.Config

	if cfg.InstanceID != k.podName() {
		t.Errorf("InstanceID %q, want the pod name %q", cfg.InstanceID, k.podName())
	}
	port := k.httpPort(t)
	wantServer := fmt.Sprintf("%s.%s.%s.svc.cluster.local:%d", k.podName(), k.headless(t).Metadata.Name, sampleNamespace, port)
	if cfg.ApplicationServer != wantServer {
		t.Errorf("ApplicationServer %q, want the pod's DNS name and port %q", cfg.ApplicationServer, wantServer)
	}
	if _, p, err := net.SplitHostPort(s.HTTPAddr); err != nil || p != strconv.Itoa(int(port)) {
		t.Errorf("HTTP address %q: want the container port %d", s.HTTPAddr, port)
	}
	if len(cfg.Brokers) == 0 || cfg.ApplicationID == "" {
		t.Errorf("brokers %q, application id %q: both needed", cfg.Brokers, cfg.ApplicationID)
	}

	// The state directory is the mount of a volume claim template, writable.
	claims := map[string]bool{}
	for _, vc := range k.sts.Spec.VolumeClaimTemplates {
		claims[vc.Metadata.Name] = true
		if _, ok := vc.Spec.Resources.Requests["storage"]; !ok {
			t.Errorf("volume claim template %s requests no storage", vc.Metadata.Name)
		}
	}
	volumes := map[string]bool{}
	for _, v := range k.sts.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	stateMounts := 0
	for _, m := range c.VolumeMounts {
		switch {
		case claims[m.Name]:
			if filepath.Clean(m.MountPath) != filepath.Clean(cfg.StateDir) {
				t.Errorf("volume %s is mounted at %s, but the state directory is %q", m.Name, m.MountPath, cfg.StateDir)
			}
			if m.ReadOnly {
				t.Errorf("the state volume %s is mounted read-only", m.Name)
			}
			stateMounts++
		case !volumes[m.Name]:
			t.Errorf("volume mount %s names neither a volume claim template nor a volume", m.Name)
		}
	}
	if stateMounts != 1 {
		t.Errorf("%d mounts of volume claim templates, want 1 (the state directory %q)", stateMounts, cfg.StateDir)
	}

	// Stopping fits the grace period: the close, the HTTP shutdown and a margin.
	closeTimeout := cfg.CloseTimeout
	if closeTimeout == 0 {
		closeTimeout = 30 * time.Second // kstream's default
	}
	gp := k.sts.Spec.Template.Spec.TerminationGracePeriodSeconds
	if gp == nil {
		t.Fatal("terminationGracePeriodSeconds is not set (the default 30s is not longer than the default close timeout)")
	}
	grace := time.Duration(*gp) * time.Second
	if need := closeTimeout + httpShutdownTimeout + stopMargin; grace < need {
		t.Errorf("terminationGracePeriodSeconds %s, want at least the close timeout %s + the HTTP shutdown %s + %s", grace, closeTimeout, httpShutdownTimeout, stopMargin)
	}
	// A static member restarted by a rolling update must be back within the session
	// timeout: it is away for its stop (up to the grace period) and its start.
	if cfg.SessionTimeout < time.Minute || cfg.SessionTimeout <= grace {
		t.Errorf("SessionTimeout %s: want at least a minute and more than the grace period %s", cfg.SessionTimeout, grace)
	}
	if r := k.sts.Spec.Replicas; r == nil || int(*r) < cfg.NumStandbys+1 {
		t.Errorf("replicas %v: want at least NumStandbys+1 = %d for the standbys to be placed", deref(r), cfg.NumStandbys+1)
	}

	// GOMEMLIMIT is the memory limit in bytes (a number without a unit means bytes).
	limit, ok := c.Resources.Limits["memory"]
	if !ok {
		t.Fatal("the container has no memory limit")
	}
	if got, want := env["GOMEMLIMIT"], strconv.FormatInt(quantityBytes(t, limit), 10); got != want {
		t.Errorf("GOMEMLIMIT resolves to %q, want the memory limit in bytes %s", got, want)
	}
	if _, ok := c.Resources.Requests["memory"]; !ok {
		t.Error("the container requests no memory")
	}
	if _, ok := c.Resources.Requests["cpu"]; !ok {
		t.Error("the container requests no CPU")
	}
}

// The StatefulSet, its Services, its PodDisruptionBudget and the kustomization agree with
// one another.
func TestManifestObjects(t *testing.T) {
	k := loadKit(t)
	sts := &k.sts
	podLabels := sts.Spec.Template.Metadata.Labels

	if sts.APIVersion != "apps/v1" {
		t.Errorf("StatefulSet apiVersion %q", sts.APIVersion)
	}
	if !selects(sts.Spec.Selector.MatchLabels, podLabels) || len(sts.Spec.Selector.MatchExpressions) > 0 {
		t.Errorf("the StatefulSet's selector %v does not select its pods %v (or uses expressions)", sts.Spec.Selector.MatchLabels, podLabels)
	}
	if p := sts.Spec.PodManagementPolicy; p != "Parallel" && p != "OrderedReady" {
		t.Errorf("podManagementPolicy %q", p)
	}
	if sts.Spec.UpdateStrategy.Type != "RollingUpdate" {
		t.Errorf("updateStrategy %q, want RollingUpdate", sts.Spec.UpdateStrategy.Type)
	}
	if r := sts.Spec.PVCRetention; r != nil {
		for _, v := range []string{r.WhenDeleted, r.WhenScaled} {
			if v != "Retain" && v != "Delete" {
				t.Errorf("persistentVolumeClaimRetentionPolicy value %q", v)
			}
		}
	}

	// The headless Service: the StatefulSet's serviceName, selecting its pods, publishing
	// pods that are not ready, on the container's port.
	h := k.headless(t)
	if h.Metadata.Name != sts.Spec.ServiceName {
		t.Errorf("headless Service %q, but the StatefulSet's serviceName is %q", h.Metadata.Name, sts.Spec.ServiceName)
	}
	if !h.Spec.PublishNotReadyAddresses {
		t.Error("the headless Service does not publish not-ready addresses: pods' names would not resolve while they rebalance or restore")
	}
	for _, svc := range k.services {
		if svc.APIVersion != "v1" {
			t.Errorf("Service %s apiVersion %q", svc.Metadata.Name, svc.APIVersion)
		}
		if !selects(svc.Spec.Selector, podLabels) {
			t.Errorf("Service %s: selector %v does not select the pods %v", svc.Metadata.Name, svc.Spec.Selector, podLabels)
		}
		if len(svc.Spec.Ports) == 0 {
			t.Errorf("Service %s has no port", svc.Metadata.Name)
		}
		for _, p := range svc.Spec.Ports {
			if got := k.targetPort(t, p.TargetPort); got != k.httpPort(t) {
				t.Errorf("Service %s port %s targets %d, not the HTTP port %d", svc.Metadata.Name, p.Name, got, k.httpPort(t))
			}
		}
	}

	// The disruption budget: one pod at a time, of these pods.
	pdb := &k.pdb
	if pdb.APIVersion != "policy/v1" {
		t.Errorf("PodDisruptionBudget apiVersion %q, want policy/v1", pdb.APIVersion)
	}
	if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IsString || mu.Int != 1 || pdb.Spec.MinAvailable != nil {
		t.Errorf("PodDisruptionBudget: maxUnavailable %v, minAvailable %v; want maxUnavailable 1 only", deref(pdb.Spec.MaxUnavailable), deref(pdb.Spec.MinAvailable))
	}
	if !selects(pdb.Spec.Selector.MatchLabels, podLabels) || len(pdb.Spec.Selector.MatchExpressions) > 0 {
		t.Errorf("PodDisruptionBudget selector %v does not select the pods %v", pdb.Spec.Selector.MatchLabels, podLabels)
	}

	// Security: not root, read-only root file system, the state volume writable by the
	// pod's group.
	ps := &sts.Spec.Template.Spec.SecurityContext
	if ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser == 0 || ps.FSGroup == nil {
		t.Errorf("pod securityContext: runAsNonRoot %v, runAsUser %v, fsGroup %v; want true, a non-zero user, a group", deref(ps.RunAsNonRoot), deref(ps.RunAsUser), deref(ps.FSGroup))
	}
	c := k.container(t)
	if sc := c.SecurityContext; sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext: readOnlyRootFilesystem %v, allowPrivilegeEscalation %v; want true, false", deref(sc.ReadOnlyRootFilesystem), deref(sc.AllowPrivilegeEscalation))
	}
	if strings.Contains(c.Image, "/") {
		t.Errorf("image %q: the kit names no registry; set yours with kustomize", c.Image)
	}

	// The probes: the ops handler's routes as this example mounts them, on the HTTP port.
	for _, pr := range []struct {
		what string
		p    *probe
		path string
	}{{"readiness", c.ReadinessProbe, readyPath}, {"liveness", c.LivenessProbe, livePath}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("no %s probe over HTTP", pr.what)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path {
			t.Errorf("%s probe path %q, want %q", pr.what, pr.p.HTTPGet.Path, pr.path)
		}
		if got := k.targetPort(t, pr.p.HTTPGet.Port); got != k.httpPort(t) {
			t.Errorf("%s probe port %s is %d, not the HTTP port %d", pr.what, pr.p.HTTPGet.Port, got, k.httpPort(t))
		}
		if pr.p.PeriodSeconds <= 0 || pr.p.FailureThreshold <= 0 || pr.p.TimeoutSeconds <= 0 {
			t.Errorf("%s probe: set periodSeconds, timeoutSeconds and failureThreshold explicitly", pr.what)
		}
	}

	// The kustomization lists every manifest of the directory, once.
	var want []string
	for _, f := range k.files {
		if f != k.kustFile {
			want = append(want, f)
		}
	}
	got := slices.Clone(k.kust.Resources)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s lists %q; the directory's manifests are %q", k.kustFile, k.kust.Resources, want)
	}
}

// The Dockerfile builds this example statically, runs it as the user the StatefulSet
// expects, exposes its HTTP port, and names no registry.
func TestDockerfile(t *testing.T) {
	k := loadKit(t)
	data, err := os.ReadFile(filepath.Join(manifestDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var froms []string
	var user, expose, build string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			froms = append(froms, f[1])
		case "USER":
			user = f[1]
		case "EXPOSE":
			expose = f[1]
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	if len(froms) < 2 || (froms[len(froms)-1] != "scratch" && !strings.Contains(froms[len(froms)-1], "distroless")) {
		t.Errorf("FROM %q: want a multi-stage build ending on scratch or distroless", froms)
	}
	for _, img := range froms {
		if host, _, ok := strings.Cut(img, "/"); ok && strings.ContainsAny(host, ".:") {
			t.Errorf("FROM %s names a registry host", img)
		}
	}
	if !strings.Contains(build, "CGO_ENABLED=0") || !strings.Contains(build, "./examples/fleet") {
		t.Errorf("the go build line %q: want CGO_ENABLED=0 and ./examples/fleet", build)
	}
	uid, _, _ := strings.Cut(user, ":")
	if ru := k.sts.Spec.Template.Spec.SecurityContext.RunAsUser; ru == nil || uid != strconv.FormatInt(*ru, 10) {
		t.Errorf("USER %q: want the numeric user of the pod's runAsUser", user)
	}
	if expose != strconv.Itoa(int(k.httpPort(t))) {
		t.Errorf("EXPOSE %q, want the HTTP port %d", expose, k.httpPort(t))
	}
}

// expandEnv follows Kubernetes' rules.
func TestExpandEnv(t *testing.T) {
	vars := map[string]string{"A": "a", "B": "b"}
	for in, want := range map[string]string{
		"$(A).$(B):80": "a.b:80",
		"$(C)-$(A)":    "$(C)-a",
		"$$(A)":        "$(A)",
		"x$":           "x$",
		"$x$(A":        "$x$(A",
		"":             "",
	} {
		if got := expandEnv(in, vars); got != want {
			t.Errorf("expandEnv(%q) = %q, want %q", in, got, want)
		}
	}
}
