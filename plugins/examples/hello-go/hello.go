// The hello example plugin in Go: each `Hello` (group
// `example.operator.dev`) keeps one ConfigMap named `<name>-greeting`
// holding `spec.greeting`, and reports in its status whether the ConfigMap
// is up to date. Same behaviour as the Rust plugins/examples/hello; the
// host's tests compare them on the same fixtures.
//
// Build (the README says the same):
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o hello-go.core.wasm .
//	host componentize hello-go.core.wasm -o hello-go.wasm
package main

import (
	_ "embed"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"operator-host.dev/sdk-go/plugin"
)

// Hello is the parent kind, as kubebuilder would generate it.
type Hello struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              HelloSpec   `json:"spec,omitempty"`
	Status            HelloStatus `json:"status,omitempty"`
}

type HelloSpec struct {
	// What the ConfigMap says; defaults to `Hello`.
	Greeting *string `json:"greeting,omitempty"`
}

type HelloStatus struct {
	UpToDate   bool               `json:"upToDate"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

const maxGreetingBytes = 64

//go:embed crd.json
var crd string

var configMaps = plugin.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}

// Controller is the plugin: kinds, reconcile, validate, default.
var Controller = &plugin.Controller[Hello]{
	Name:      "hello-go",
	Version:   "0.1.0",
	For:       plugin.GroupVersionKind{Group: "example.operator.dev", Version: "v1alpha1", Kind: "Hello"},
	Owns:      []plugin.GroupVersionKind{configMaps},
	CRDs:      []string{crd},
	Reconcile: reconcile,
	Validate:  validate,
	Default:   defaults,
}

func init() { plugin.Register(Controller) }

func main() {}

func greetingOf(h *Hello) string {
	if h.Spec.Greeting != nil {
		return *h.Spec.Greeting
	}
	return "Hello"
}

func reconcile(r *plugin.Request[Hello]) (plugin.Result, error) {
	hello := r.Parent
	name := hello.Name + "-greeting"
	desired := map[string]string{"greeting": greetingOf(hello)}
	existing, err := plugin.Of[corev1.ConfigMap](r.Children, configMaps)
	if err != nil {
		return plugin.Result{}, plugin.Error("InvalidChild", err.Error(), false)
	}
	changed := false
	var found *corev1.ConfigMap
	for i := range existing {
		if existing[i].Name == name {
			found = &existing[i]
		}
	}
	switch {
	case found == nil:
		cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Data: desired}
		if err := r.Create(&cm); err != nil {
			return plugin.Result{}, err
		}
		r.Event(plugin.Normal, "Created", "created ConfigMap %s", name)
		changed = true
	case !maps.Equal(found.Data, desired):
		target := plugin.ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: hello.Namespace, Name: name}
		if err := r.Patch(target, map[string]any{"data": desired}); err != nil {
			return plugin.Result{}, err
		}
		changed = true
	}
	return plugin.Result{}, r.SetStatus(map[string]bool{"upToDate": !changed})
}

func validate(hello, _ *Hello) field.ErrorList {
	var errs field.ErrorList
	if g := hello.Spec.Greeting; g != nil && len(*g) > maxGreetingBytes {
		errs = append(errs, field.TooLong(field.NewPath("spec", "greeting"), *g, maxGreetingBytes))
	}
	return errs
}

func defaults(hello *Hello) error {
	if hello.Spec.Greeting == nil {
		g := "Hello"
		hello.Spec.Greeting = &g
	}
	return nil
}
