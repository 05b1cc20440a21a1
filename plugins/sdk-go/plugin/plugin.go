// Package plugin writes operator-host plugins in Go: the contract
// operator:plugin@0.3.0 behind a controller-runtime-like API.
//
// A plugin registers one Plugin in its main package's init (usually a
// typed Controller, see controller.go) and is built as a WASI reactor:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.core.wasm .
//	host componentize plugin.core.wasm -o plugin.wasm
//
// The same logic runs natively under `go test` (see the plugintest package).
package plugin

// Plugin is the contract at the level of JSON texts: what the Wasm exports
// call. Controller implements it over typed objects.
type Plugin interface {
	PluginManifest() Manifest
	// Reconcile answers the steps for one parent (contract 0.3's
	// desired.reconcile); nowMillis is the host clock.
	ReconcileJSON(parent string, children, related []string, nowMillis int64) ([]Step, *ReconcileError)
	ValidateJSON(object string, old *string) []FieldError
	DefaultJSON(object string) (string, *ReconcileError)
}

var registered Plugin

// Register makes p the plugin the module's exports serve. Call it once,
// from an init function of the main package.
func Register(p Plugin) {
	if registered != nil {
		panic("plugin.Register called twice")
	}
	registered = p
}

func current() Plugin {
	if registered == nil {
		panic("no plugin registered: call plugin.Register from an init function of package main")
	}
	return registered
}
