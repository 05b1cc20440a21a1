package plugin

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Objects are children or related objects as the host passes them: JSON
// texts of any kinds. Of decodes those of one kind into typed values.
type Objects []string

// Of decodes every object of kind gvk into a T (e.g. batchv1.Job). An
// object that does not decode is an error naming it: a plugin should not
// act on a partial view.
func Of[T any](objects Objects, gvk GroupVersionKind) ([]T, error) {
	var out []T
	for _, text := range objects {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(text), &head); err != nil {
			return nil, fmt.Errorf("cannot read an object: %w", err)
		}
		if head.APIVersion != gvk.APIVersion() || head.Kind != gvk.Kind {
			continue
		}
		var obj T
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			return nil, fmt.Errorf("cannot read %s %s: %w", gvk.Kind, head.Metadata.Name, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// Unstructured decodes every object, of whatever kind, as unstructured
// (the escape hatch for kinds without Go types).
func (o Objects) Unstructured() ([]unstructured.Unstructured, error) {
	out := make([]unstructured.Unstructured, 0, len(o))
	for _, text := range o {
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON([]byte(text)); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}
