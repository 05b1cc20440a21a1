package main

import (
	"os"
	"testing"

	"operator-host.dev/sdk-go/plugintest"
)

// plugins/cronjob's fixtures, answered the same by this plugin natively;
// the host's tests run them through cronjob-go.wasm too. Two fixtures
// quote the JSON decoder's own words for a value it cannot read, which
// differ between Rust's serde and Go's encoding/json: those texts are
// compared up to the decoder's words (see plugintest.DecoderWordsAfter).
func TestEveryFixtureOfTheRustCronJobGivesItsExpectedActions(t *testing.T) {
	plugintest.CheckFixtures(t, Plugin, "../../cronjob/tests/fixtures", 3, plugintest.DecoderWordsAfter(DecoderMessagePrefixes...))
}

// DecoderMessagePrefixes end where a message quotes the decoder.
var DecoderMessagePrefixes = []string{"cannot read CronJob malformed: ", "a child is not a valid batch/v1 Job: "}

func TestTheCRDIsTheRustPluginsCRD(t *testing.T) {
	ours, err := os.ReadFile("crd.json")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := os.ReadFile("../../cronjob/crd.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(ours) != string(theirs) {
		t.Fatal("crd.json differs from plugins/cronjob/crd.json: copy it again (cp ../../cronjob/crd.json .)")
	}
}
