// Package plugintest runs a plugin's logic natively over fixtures in the
// format the Rust SDK uses (operator_plugin_sdk::testing): a directory per
// case with parent.yaml, optional multi-document children.yaml and
// related.yaml, now.txt (RFC 3339) and expected.json, exactly what `host
// reconcile --output json` prints for those inputs. The host's tests run
// the same cases through the built component, so native Go, Wasm and the
// other languages are held to one set of answers.
//
// UPDATE_FIXTURES=1 rewrites expected.json; review every rewritten file:
// fixtures are assertions.
package plugintest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/yaml"

	"operator-host.dev/sdk-go/plugin"
)

// Fixture is one case's inputs.
type Fixture struct {
	Dir      string
	Parent   string
	Children []string
	Related  []string
	Now      time.Time
}

// Load reads the case in dir.
func Load(dir string) (*Fixture, error) {
	parents, err := documents(filepath.Join(dir, "parent.yaml"), true)
	if err != nil {
		return nil, err
	}
	if len(parents) != 1 {
		return nil, errors.New(filepath.Join(dir, "parent.yaml") + ": exactly one parent")
	}
	children, err := documents(filepath.Join(dir, "children.yaml"), false)
	if err != nil {
		return nil, err
	}
	related, err := documents(filepath.Join(dir, "related.yaml"), false)
	if err != nil {
		return nil, err
	}
	nowText, err := os.ReadFile(filepath.Join(dir, "now.txt"))
	if err != nil {
		return nil, err
	}
	now, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(nowText)))
	if err != nil {
		return nil, errors.New(filepath.Join(dir, "now.txt") + ": " + err.Error())
	}
	return &Fixture{Dir: dir, Parent: parents[0], Children: children, Related: related, Now: now}, nil
}

// Run is the plugin's answer in the host's JSON form.
func (f *Fixture) Run(p plugin.Plugin) any {
	steps, err := p.ReconcileJSON(f.Parent, f.Children, f.Related, f.Now.UnixMilli())
	return plugin.HostJSON(steps, err)
}

// Option changes how CheckFixtures compares.
type Option func(*options)

type options struct {
	decoderPrefixes []string
}

// DecoderWordsAfter compares a string containing one of prefixes only up
// to the end of that prefix. For fixtures shared with plugins in other
// languages whose messages quote their JSON decoder (Rust's serde and Go's
// encoding/json word the same bad value differently): everything else of
// the answer, and the message up to the decoder's words, still compares.
func DecoderWordsAfter(prefixes ...string) Option {
	return func(o *options) { o.decoderPrefixes = append(o.decoderPrefixes, prefixes...) }
}

// CheckFixtures runs every case under dir through p, each `repeat` times
// (a reconcile must be a function of its inputs), and compares with
// expected.json.
func CheckFixtures(t *testing.T, p plugin.Plugin, dir string, repeat int, opts ...Option) {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cases []string
	for _, e := range entries {
		if e.IsDir() {
			cases = append(cases, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(cases)
	if len(cases) == 0 {
		t.Fatalf("no fixtures under %s", dir)
	}
	update := os.Getenv("UPDATE_FIXTURES") != ""
	for _, c := range cases {
		t.Run(filepath.Base(c), func(t *testing.T) {
			f, err := Load(c)
			if err != nil {
				t.Fatal(err)
			}
			got := normalise(t, f.Run(p))
			for i := 1; i < repeat; i++ {
				if again := normalise(t, f.Run(p)); !reflect.DeepEqual(again, got) {
					t.Fatalf("run %d answered differently: %v\nthen %v", i+1, got, again)
				}
			}
			expectedPath := filepath.Join(c, "expected.json")
			if update {
				text, _ := json.MarshalIndent(got, "", "  ")
				if err := os.WriteFile(expectedPath, text, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			text, err := os.ReadFile(expectedPath)
			if err != nil {
				t.Fatal(err)
			}
			var want any
			if err := json.Unmarshal(text, &want); err != nil {
				t.Fatalf("%s: %v", expectedPath, err)
			}
			if !reflect.DeepEqual(cut(got, o.decoderPrefixes), cut(want, o.decoderPrefixes)) {
				gotText, _ := json.MarshalIndent(got, "", "  ")
				t.Fatalf("%s: got\n%s\nwant\n%s", expectedPath, gotText, text)
			}
		})
	}
}

// cut is v with every string that contains one of prefixes ended there.
func cut(v any, prefixes []string) any {
	switch v := v.(type) {
	case string:
		for _, p := range prefixes {
			if i := strings.Index(v, p); i >= 0 {
				return v[:i+len(p)] + "…"
			}
		}
		return v
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cut(e, prefixes)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = cut(e, prefixes)
		}
		return out
	}
	return v
}

// normalise is v as JSON decodes it (numbers as float64, maps), so it
// compares with expected.json by meaning, not by Go type.
func normalise(t *testing.T, v any) any {
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// documents are the YAML documents of path as JSON texts (none when an
// optional file is missing).
func documents(path string, required bool) ([]string, error) {
	text, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !required {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	decoder := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	var out []string
	for {
		// Raw JSON text, not a decoded value: an int64 such as
		// 9223372036854775807 stays exact (a float64 would round it).
		var doc json.RawMessage
		if err := decoder.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			return nil, errors.New(path + ": " + err.Error())
		}
		if len(doc) == 0 || string(doc) == "null" {
			continue
		}
		out = append(out, string(doc))
	}
	return out, nil
}
