package book

// The CronJob API of the kubebuilder book's tutorial (group
// batch.tutorial.kubebuilder.io, version v1), as the Go types a
// controller-runtime client reads and writes. Only the fields this test uses
// are declared; the CRD itself comes from whatever serves the API (the
// operator host installs it with the cronjob plugin).

import (
	"encoding/json"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	groupVersion  = schema.GroupVersion{Group: "batch.tutorial.kubebuilder.io", Version: "v1"}
	schemeBuilder = &scheme.Builder{GroupVersion: groupVersion}
)

func init() {
	schemeBuilder.Register(&CronJob{}, &CronJobList{})
}

type CronJobSpec struct {
	Schedule                   string                  `json:"schedule"`
	StartingDeadlineSeconds    *int64                  `json:"startingDeadlineSeconds,omitempty"`
	ConcurrencyPolicy          string                  `json:"concurrencyPolicy,omitempty"`
	Suspend                    *bool                   `json:"suspend,omitempty"`
	JobTemplate                batchv1.JobTemplateSpec `json:"jobTemplate"`
	SuccessfulJobsHistoryLimit *int32                  `json:"successfulJobsHistoryLimit,omitempty"`
	FailedJobsHistoryLimit     *int32                  `json:"failedJobsHistoryLimit,omitempty"`
}

type CronJobStatus struct {
	Active           []corev1.ObjectReference `json:"active,omitempty"`
	LastScheduleTime *metav1.Time             `json:"lastScheduleTime,omitempty"`
	Conditions       []metav1.Condition       `json:"conditions,omitempty"`
}

type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              CronJobSpec   `json:"spec,omitempty"`
	Status            CronJobStatus `json:"status,omitempty"`
}

type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronJob `json:"items"`
}

// deepCopy copies through JSON: these types hold nothing JSON does not
// carry, and a test has no use for generated deep-copy code.
func deepCopy[T any](in *T) *T {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	out := new(T)
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

func (c *CronJob) DeepCopyObject() runtime.Object     { return deepCopy(c) }
func (c *CronJobList) DeepCopyObject() runtime.Object { return deepCopy(c) }
