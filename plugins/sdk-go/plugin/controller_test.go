package plugin

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

type thing struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		Size int64 `json:"size"`
	} `json:"spec"`
}

const parent = `{"apiVersion":"g/v1","kind":"Thing","metadata":{"name":"t","namespace":"ns","generation":3},"spec":{"size":2}}`

func TestRequeueAfterRoundsToMillisecondsAndComesLast(t *testing.T) {
	c := &Controller[thing]{Reconcile: func(r *Request[thing]) (Result, error) {
		r.Event(Warning, "Big", "size %d", r.Parent.Spec.Size)
		return Result{RequeueAfter: 1500 * time.Millisecond}, nil
	}}
	steps, err := c.ReconcileJSON(parent, nil, nil, 0)
	if err != nil || len(steps) != 2 || steps[0].Act.Message != "size 2" || steps[1].Act.Kind != ActRequeueAfter || steps[1].Act.Millis != 1500 {
		t.Fatalf("%+v %v", steps, err)
	}
}

func TestAnUnreadableParentIsAPermanentInvalidSpec(t *testing.T) {
	c := &Controller[thing]{For: GroupVersionKind{"g", "v1", "Thing"}, Reconcile: func(*Request[thing]) (Result, error) { return Result{}, nil }}
	_, err := c.ReconcileJSON(`{"spec":{"size":"two"}}`, nil, nil, 0)
	if err == nil || err.Reason != "InvalidSpec" || err.Retryable {
		t.Fatalf("%+v", err)
	}
}

func TestPlainErrorsRetryAndReconcileErrorsKeepTheirOwnRetry(t *testing.T) {
	c := &Controller[thing]{Reconcile: func(*Request[thing]) (Result, error) { return Result{}, errors.New("flaky") }}
	if _, err := c.ReconcileJSON(parent, nil, nil, 0); err == nil || !err.Retryable || err.Message != "flaky" {
		t.Fatalf("%+v", err)
	}
	c.Reconcile = func(*Request[thing]) (Result, error) { return Result{}, Error("Bad", "no", false) }
	if _, err := c.ReconcileJSON(parent, nil, nil, 0); err == nil || err.Retryable || err.Reason != "Bad" {
		t.Fatalf("%+v", err)
	}
}

func TestAPanicIsAReconcileErrorNotATrap(t *testing.T) {
	c := &Controller[thing]{Reconcile: func(*Request[thing]) (Result, error) { panic("boom") }}
	if _, err := c.ReconcileJSON(parent, nil, nil, 0); err == nil || err.Reason != "Panic" || err.Message != "boom" {
		t.Fatalf("%+v", err)
	}
}

func TestSetConditionStampsTheHostClockOnlyWhenTheStatusChanges(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := &Request[thing]{Now: now}
	var conds []metav1.Condition
	r.SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Up"})
	r.Now = now.Add(time.Hour)
	r.SetCondition(&conds, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "StillUp"})
	if len(conds) != 1 || !conds[0].LastTransitionTime.Time.Equal(now) || conds[0].Reason != "StillUp" {
		t.Fatalf("%+v", conds)
	}
}

func TestPatchAndDeleteTargetTheParentsNamespaceByDefault(t *testing.T) {
	c := &Controller[thing]{Reconcile: func(r *Request[thing]) (Result, error) {
		r.Delete(ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "c"}, Foreground)
		return Result{}, r.Patch(ObjectRef{APIVersion: "v1", Kind: "ConfigMap", Name: "c"}, map[string]int{"a": 1})
	}}
	steps, _ := c.ReconcileJSON(parent, nil, nil, 0)
	got, _ := json.Marshal(HostJSON(steps, nil))
	want := `[{"delete":{"propagation":"Foreground","target":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"c"}}},{"patch":{"patch":{"a":1},"target":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"c"}}}]`
	if string(got) != want {
		t.Fatalf("%s", got)
	}
}

func TestFieldErrorsKeepTheAPIServersTypesAndValues(t *testing.T) {
	p := field.NewPath("spec", "schedule")
	got := FieldErrors(field.ErrorList{field.Invalid(p, "bad", "must be a valid cron schedule"), field.Required(p, ""), field.NotSupported(p, "x", []string{"a"})})
	if got[0].Kind != FieldInvalid || got[0].Field != "spec.schedule" || *got[0].Value != `"bad"` || got[1].Kind != FieldRequired || got[1].Value != nil || got[2].Kind != FieldNotSupported {
		t.Fatalf("%+v", got)
	}
}
