// Command kubecheck validates deploy/kubernetes against the Kubernetes API types: every document
// is decoded strictly into the Go type of its kind (k8s.io/api, the types the API server and its
// published schemas are generated from), so an unknown or misspelt field, a wrong type or a
// duplicate key fails; then the references between the documents are checked (selectors match
// the pod labels, probes name a declared port, envFrom, volumes and images name what exists).
// It is a module of its own so the gateway's module does not depend on k8s.io.
//
//	go run . ../kubernetes    (make check-deploy runs it)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomization.yaml this check reads.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// objects are the decoded documents, by kind.
type objects struct {
	namespaces  []corev1.Namespace
	configMaps  []corev1.ConfigMap
	secrets     []corev1.Secret
	pvcs        []corev1.PersistentVolumeClaim
	services    []corev1.Service
	deployments []appsv1.Deployment
	jobs        []batchv1.Job
	pdbs        []policyv1.PodDisruptionBudget
	kustomize   *kustomization
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kubecheck DIR")
		os.Exit(2)
	}
	problems, n, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubecheck:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "kubecheck:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
	fmt.Printf("kubecheck: %d documents in %s decode strictly into the Kubernetes API types and reference each other consistently\n", n, os.Args[1])
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

func check(dir string) ([]string, int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, 0, fmt.Errorf("no YAML files in %s", dir)
	}
	var objs objects
	var problems []string
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, 0, err
		}
		for _, doc := range docSeparator.Split(string(b), -1) {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			n++
			if err := decode(&objs, []byte(doc)); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", filepath.Base(f), err))
			}
		}
	}
	if len(problems) > 0 {
		return problems, n, nil
	}
	return append(problems, crossCheck(objs, files)...), n, nil
}

func stripComments(doc string) string {
	var keep []string
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// decode reads the kind, then decodes the document strictly into that kind's type.
func decode(objs *objects, doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	strict := func(into any) error { return yaml.UnmarshalStrict(doc, into) }
	want := map[string]string{
		"Namespace": "v1", "ConfigMap": "v1", "Secret": "v1", "PersistentVolumeClaim": "v1", "Service": "v1",
		"Deployment": "apps/v1", "Job": "batch/v1", "PodDisruptionBudget": "policy/v1",
		"Kustomization": "kustomize.config.k8s.io/v1beta1",
	}
	if v, ok := want[head.Kind]; !ok {
		return fmt.Errorf("kind %q is not one this kit uses", head.Kind)
	} else if head.APIVersion != v {
		return fmt.Errorf("%s has apiVersion %q, want %q", head.Kind, head.APIVersion, v)
	}
	var err error
	switch head.Kind {
	case "Namespace":
		var o corev1.Namespace
		err = strict(&o)
		objs.namespaces = append(objs.namespaces, o)
	case "ConfigMap":
		var o corev1.ConfigMap
		err = strict(&o)
		objs.configMaps = append(objs.configMaps, o)
	case "Secret":
		var o corev1.Secret
		err = strict(&o)
		objs.secrets = append(objs.secrets, o)
	case "PersistentVolumeClaim":
		var o corev1.PersistentVolumeClaim
		err = strict(&o)
		objs.pvcs = append(objs.pvcs, o)
	case "Service":
		var o corev1.Service
		err = strict(&o)
		objs.services = append(objs.services, o)
	case "Deployment":
		var o appsv1.Deployment
		err = strict(&o)
		objs.deployments = append(objs.deployments, o)
	case "Job":
		var o batchv1.Job
		err = strict(&o)
		objs.jobs = append(objs.jobs, o)
	case "PodDisruptionBudget":
		var o policyv1.PodDisruptionBudget
		err = strict(&o)
		objs.pdbs = append(objs.pdbs, o)
	case "Kustomization":
		var o kustomization
		err = strict(&o)
		objs.kustomize = &o
	}
	if err != nil {
		return fmt.Errorf("%s: %w", head.Kind, err)
	}
	return nil
}

// crossCheck verifies what a strict decode cannot: names are valid, and what one document
// names exists in another.
func crossCheck(o objects, files []string) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := map[string]bool{}
	checkName := func(kind, name string) {
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			fail("%s %q: %s", kind, name, msg)
		}
		names[kind+"/"+name] = true
	}
	for _, x := range o.configMaps {
		checkName("ConfigMap", x.Name)
		for k := range x.Data {
			for _, msg := range validation.IsEnvVarName(k) {
				fail("ConfigMap %s key %q: %s", x.Name, k, msg)
			}
		}
	}
	for _, x := range o.secrets {
		checkName("Secret", x.Name)
	}
	for _, x := range o.pvcs {
		checkName("PersistentVolumeClaim", x.Name)
	}
	if len(o.deployments) != 1 || len(o.jobs) != 1 || len(o.services) != 1 || len(o.pdbs) != 1 {
		fail("want one Deployment, Job, Service and PodDisruptionBudget; have %d, %d, %d, %d",
			len(o.deployments), len(o.jobs), len(o.services), len(o.pdbs))
		return problems
	}
	d, job, svc, pdb := o.deployments[0], o.jobs[0], o.services[0], o.pdbs[0]
	podLabels := labels.Set(d.Spec.Template.Labels)
	if d.Spec.Selector == nil || !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(podLabels) {
		fail("the Deployment's selector does not match its pod labels")
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(podLabels) {
		fail("the Service's selector does not match the Deployment's pods")
	}
	if pdb.Spec.Selector == nil || !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		fail("the PodDisruptionBudget's selector does not match the Deployment's pods")
	}
	ports := map[string]bool{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.StrVal != "" && !ports[p.TargetPort.StrVal] {
			fail("the Service targets port %q, which the pod does not declare", p.TargetPort.StrVal)
		}
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.ReadinessProbe == nil || c.LivenessProbe == nil {
			fail("container %s lacks a readiness or liveness probe", c.Name)
		}
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if p != nil && p.HTTPGet != nil && p.HTTPGet.Port.StrVal != "" && !ports[p.HTTPGet.Port.StrVal] {
				fail("container %s probes port %q, which it does not declare", c.Name, p.HTTPGet.Port.StrVal)
			}
		}
	}
	images := map[string]bool{}
	if o.kustomize != nil {
		for _, img := range o.kustomize.Images {
			images[img.Name] = true
		}
		listed := map[string]bool{}
		for _, r := range o.kustomize.Resources {
			listed[r] = true
		}
		for _, f := range files {
			if base := filepath.Base(f); base != "kustomization.yaml" && !listed[base] {
				fail("%s is not among the kustomization's resources", base)
			}
		}
	}
	for kind, spec := range map[string]corev1.PodSpec{"Deployment": d.Spec.Template.Spec, "Job": job.Spec.Template.Spec} {
		volumes := map[string]bool{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = true
			if v.PersistentVolumeClaim != nil && !names["PersistentVolumeClaim/"+v.PersistentVolumeClaim.ClaimName] {
				fail("%s mounts claim %q, which is not defined", kind, v.PersistentVolumeClaim.ClaimName)
			}
		}
		if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
			fail("%s does not require a non-root user", kind)
		}
		for _, c := range spec.Containers {
			if o.kustomize != nil && !images[c.Image] {
				fail("%s container %s uses image %q, which the kustomization does not set", kind, c.Name, c.Image)
			}
			for _, m := range c.VolumeMounts {
				if !volumes[m.Name] {
					fail("%s container %s mounts volume %q, which the pod does not define", kind, c.Name, m.Name)
				}
			}
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil && !names["ConfigMap/"+e.ConfigMapRef.Name] {
					fail("%s takes env from ConfigMap %q, which is not defined", kind, e.ConfigMapRef.Name)
				}
				if e.SecretRef != nil && !names["Secret/"+e.SecretRef.Name] {
					fail("%s takes env from Secret %q, which is not defined", kind, e.SecretRef.Name)
				}
			}
		}
	}
	if job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure && job.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		fail("the Job's restartPolicy must be OnFailure or Never")
	}
	return problems
}
