package main

import (
	"testing"

	"operator-host.dev/sdk-go/plugintest"
)

// The Rust hello's fixtures, answered the same by this plugin natively;
// the host's tests run them through hello-go.wasm too.
func TestEveryFixtureGivesItsExpectedActions(t *testing.T) {
	plugintest.CheckFixtures(t, Controller, "../hello/tests/fixtures", 3)
}
