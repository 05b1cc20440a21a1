// The kubebuilder book's CronJob controller in Go, as an operator-host
// plugin: the same API, CRD and behaviour as plugins/cronjob (Rust), which
// it is held to by that plugin's fixtures (natively by `go test`, and as
// a component by the host's tests). The cron parser is robfig/cron v3, as
// in the book and in upstream's CronJob controller.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o cronjob-go.core.wasm .
//	host componentize cronjob-go.core.wasm -o cronjob-go.wasm
package main

import (
	_ "embed"
	"encoding/json"
	"strings"

	"operator-host.dev/sdk-go/plugin"
)

//go:embed crd.json
var crd string

// Controller is the typed controller: kinds, reconcile, validate.
var Controller = &plugin.Controller[CronJob]{
	// The Rust build's name and CRD, so either build can replace the other
	// in a running host (a hot swap through the plugin ConfigMap).
	Name:      "cronjob",
	Version:   "0.1.0-go",
	For:       plugin.GroupVersionKind{Group: "batch.tutorial.kubebuilder.io", Version: "v1", Kind: "CronJob"},
	Owns:      []plugin.GroupVersionKind{jobKind},
	CRDs:      []string{crd},
	Reconcile: reconcile,
	Validate:  validateCronJob,
}

// cronJobPlugin is the controller with the book's defaulting webhook done
// on the object as sent, so fields the Go types do not know are kept.
type cronJobPlugin struct {
	*plugin.Controller[CronJob]
}

// Plugin is what the module registers.
var Plugin plugin.Plugin = cronJobPlugin{Controller}

func init() { plugin.Register(Plugin) }

func main() {}

// DefaultJSON is the book's defaulter: concurrencyPolicy Allow, suspend
// false, history limits 3 and 1; only unset (or null, or "") fields are
// filled, explicit values (even 0) stay.
func (cronJobPlugin) DefaultJSON(object string) (string, *plugin.ReconcileError) {
	var obj map[string]any
	decoder := json.NewDecoder(strings.NewReader(object))
	decoder.UseNumber() // an int64 stays exact
	if err := decoder.Decode(&obj); err != nil || obj == nil {
		return "", &plugin.ReconcileError{Reason: "InvalidObject", Message: "a CronJob must be a JSON object"}
	}
	if obj["spec"] == nil {
		obj["spec"] = map[string]any{}
	}
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return "", &plugin.ReconcileError{Reason: "InvalidSpec", Message: "spec must be an object"}
	}
	for _, d := range []struct {
		field string
		value any
	}{{"concurrencyPolicy", "Allow"}, {"suspend", false}, {"successfulJobsHistoryLimit", 3}, {"failedJobsHistoryLimit", 1}} {
		if v, set := spec[d.field]; !set || v == nil || v == "" {
			spec[d.field] = d.value
		}
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return "", &plugin.ReconcileError{Reason: "DefaultFailed", Message: err.Error()}
	}
	return string(out), nil
}
